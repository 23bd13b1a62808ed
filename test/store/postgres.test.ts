import { openTestPostgres } from '../support/postgres.ts';
import { storeContract } from './contract.ts';
import { runsContract } from './runs-contract.ts';

storeContract('postgres', async () => {
  const { store, cleanup } = await openTestPostgres();
  return { store, cleanup };
});

runsContract('postgres (two nodes)', async () => {
  const { store, another, cleanup } = await openTestPostgres();
  return { store, another, cleanup };
});
