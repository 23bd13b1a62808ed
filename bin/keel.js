#!/usr/bin/env node
// The published entry point runs the compiled CLI (npm ci builds dist/ through `prepare`).
import { cli } from '../dist/cli/main.js';

await cli();
