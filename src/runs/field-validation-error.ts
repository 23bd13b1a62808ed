import { StoreError } from '../store/index.ts';

/** Bad input to the runs layer's API, naming the field at fault: a `validation` error (HTTP 400). */
export class FieldValidationError extends StoreError {
  readonly field: string;
  constructor(field: string, message: string) {
    super('validation', `${field}: ${message}`);
    this.name = new.target.name;
    this.field = field;
  }
}
