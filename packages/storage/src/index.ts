export type { FileStorage, FileStorageOptions } from "./file-storage.js";
export { createFileStorage } from "./file-storage.js";
export { assertValidKey, keyProblem } from "./storage-key.js";
