import { endOwnedProcessesAfterEachFile } from './child-processes.js';

// Runs before every test file (vitest.config.ts setupFiles).
endOwnedProcessesAfterEachFile();
