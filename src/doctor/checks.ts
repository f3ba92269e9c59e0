import type { Check } from './check.js';
import { LOCAL_CHECKS } from './local-checks.js';
import { slotsCheck } from './slot-check.js';
import { UPSTREAM_CHECKS } from './upstream-checks.js';

/**
 * What `compactor doctor` checks, in the order it prints them: the upstream
 * first (nothing else matters while it does not answer), then compactor's
 * own side. Add a check here to add a line.
 */
export const CHECKS: readonly Check[] = [...UPSTREAM_CHECKS, slotsCheck, ...LOCAL_CHECKS];
