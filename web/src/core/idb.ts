// A small promise wrapper over raw IndexedDB (no dependency), and the client's database layout.
//
// Database "codedeck-web", version 1:
//   bridges  key: bridge pubkey hex            value: BridgeRow (record, secret key, cursors, state)
//   entries  key: [bridgeId, sessionId, seq]   value: { seq, entry }   (transcripts)
//   outbox   key: [bridgeId, inputId]          value: StoredOutboxItem (inputs and their signed events)
//   meta     key: string                        value: anything ("manualKey": the next manual-pair key)
// Secret keys stay in this database (same-origin only) and are never sent anywhere.

export const DB_NAME = "codedeck-web";
export const DB_VERSION = 1;
export const STORES = ["bridges", "entries", "outbox", "meta"] as const;
export type StoreName = (typeof STORES)[number];

export function promised<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error("IndexedDB request failed"));
  });
}

export function openDatabase(name = DB_NAME): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(name, DB_VERSION);
    request.onupgradeneeded = () => {
      const db = request.result;
      for (const store of STORES) if (!db.objectStoreNames.contains(store)) db.createObjectStore(store);
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error("IndexedDB could not be opened"));
    request.onblocked = () => reject(new Error("IndexedDB is blocked by another tab of an older version"));
  });
}

/** Runs `work` in one transaction; resolves when the transaction completes. */
export function transact<T>(
  db: IDBDatabase,
  stores: StoreName[],
  mode: IDBTransactionMode,
  work: (tx: IDBTransaction) => T,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const tx = db.transaction(stores, mode);
    let result: T;
    tx.oncomplete = () => resolve(result);
    tx.onerror = () => reject(tx.error ?? new Error("IndexedDB transaction failed"));
    tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
    try {
      result = work(tx);
    } catch (err) {
      tx.abort();
      reject(err);
    }
  });
}

export function getValue<T>(db: IDBDatabase, store: StoreName, key: IDBValidKey): Promise<T | undefined> {
  return promised(db.transaction(store).objectStore(store).get(key)) as Promise<T | undefined>;
}

export function getAllValues<T>(db: IDBDatabase, store: StoreName, range?: IDBKeyRange): Promise<T[]> {
  return promised(db.transaction(store).objectStore(store).getAll(range)) as Promise<T[]>;
}

/** Every key [prefix, …] of a store keyed by arrays (arrays sort after strings and numbers). */
export function prefixRange(...prefix: IDBValidKey[]): IDBKeyRange {
  return IDBKeyRange.bound(prefix, [...prefix, []]);
}
