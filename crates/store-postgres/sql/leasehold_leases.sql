-- leasehold lease table (Postgres). Idempotent: safe to run more than once.
-- One row per lease name; rows are never deleted (a release clears holder,
-- an administrative delete sets deleted), so tokens and versions never repeat.
-- acquired_at / expires_at are the server's now() (timestamptz).
-- The role needs SELECT, INSERT and UPDATE on the table.
CREATE TABLE IF NOT EXISTS "leasehold_leases" (
    name               VARCHAR(200) PRIMARY KEY,
    holder             VARCHAR(128),
    fence_token        BIGINT NOT NULL,
    version            BIGINT NOT NULL,
    ttl_ms             BIGINT NOT NULL,
    acquired_at        TIMESTAMPTZ NOT NULL,
    expires_at         TIMESTAMPTZ NOT NULL,
    wall_expires_at_ms BIGINT,
    deleted            BOOLEAN NOT NULL DEFAULT FALSE
);
