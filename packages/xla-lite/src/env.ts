/** An environment variable, where the runtime has a process environment (Node); else undefined. */
export const envVar = (name: string): string | undefined => (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
