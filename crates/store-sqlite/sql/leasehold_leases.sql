-- leasehold lease table (SQLite). Idempotent: safe to run more than once.
-- One row per lease name; rows are never deleted (a release clears holder,
-- an administrative delete sets deleted), so tokens and versions never repeat.
-- acquired_at_ms / expires_at_ms are boot-clock ms in the boot boot_id names (else expired).
-- Every leasing process needs write access to the database file and its directory.
CREATE TABLE IF NOT EXISTS "leasehold_leases" (
    name               VARCHAR(200) NOT NULL PRIMARY KEY,
    holder             VARCHAR(128),
    fence_token        INTEGER NOT NULL,
    version            INTEGER NOT NULL,
    ttl_ms             INTEGER NOT NULL,
    acquired_at_ms     INTEGER NOT NULL,
    expires_at_ms      INTEGER NOT NULL,
    wall_expires_at_ms INTEGER,
    deleted            INTEGER NOT NULL DEFAULT 0,
    write_id           INTEGER NOT NULL DEFAULT 0,
    boot_id            TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
