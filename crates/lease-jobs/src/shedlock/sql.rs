//! The statements the ShedLock store sends, built once per table.
//!
//! Each write is one statement: a data-modifying CTE and, in the same round trip, the
//! current row when the write did not apply. Times come from the database's clock,
//! exactly as ShedLock's `usingDbTime()` statements take them
//! (`timezone('utc', CURRENT_TIMESTAMP)` for `TIMESTAMP` columns).

use std::sync::Arc;

/// The statements for one table.
#[derive(Debug, Clone)]
pub(crate) struct Statements {
    pub(crate) read: Arc<str>,
    pub(crate) create: Arc<str>,
    pub(crate) update: Arc<str>,
    pub(crate) claim: Arc<str>,
    pub(crate) delete: Arc<str>,
    /// The names starting with `$1` (byte for byte: no `LIKE`).
    pub(crate) list: Arc<str>,
}

/// The table's shape, as found in the catalog.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// The quoted, possibly schema-qualified table name.
    pub(crate) table: String,
    /// The quoted fence column, if the table has one.
    pub(crate) fence: Option<String>,
    /// Whether the time columns are `TIMESTAMP WITH TIME ZONE`.
    pub(crate) tz: bool,
}

fn micros(col: &str) -> String {
    format!("(EXTRACT(EPOCH FROM {col}) * 1000000)::bigint")
}

impl Statements {
    pub(crate) fn build(shape: &Shape) -> Self {
        let t = &shape.table;
        let now = if shape.tz { "now()" } else { "timezone('utc', now())" };
        let ttl = "($2::bigint * interval '1 millisecond')";
        let cols = |a: &str| {
            format!(
                "{a}.locked_by AS locked_by, {at} AS at_us, {until} AS until_us, \
                 GREATEST(0, FLOOR(EXTRACT(EPOCH FROM ({a}.lock_until - {now})) * 1000))::bigint AS remaining_ms, \
                 {fence} AS fence",
                at = micros(&format!("{a}.locked_at")),
                until = micros(&format!("{a}.lock_until")),
                fence = shape
                    .fence
                    .as_ref()
                    .map_or("NULL::bigint".to_owned(), |f| format!("{a}.{f}")),
            )
        };
        let outcome = |modify: String| {
            format!(
                "WITH w AS ({modify}) \
                 SELECT true AS written, {w} FROM w \
                 UNION ALL \
                 SELECT false AS written, {c} FROM {t} c WHERE c.name = $1 AND NOT EXISTS (SELECT 1 FROM w)",
                w = cols("w"),
                c = cols("c"),
            )
        };
        let at_r = micros("r.locked_at");
        let until_r = micros("r.lock_until");
        let read = format!("SELECT {} FROM {t} r WHERE r.name = $1", cols("r"));
        let list: Arc<str> = format!("SELECT name FROM {t} WHERE starts_with(name, $1)").into();
        match &shape.fence {
            Some(f) => Self {
                read: read.into(),
                list,
                // $1 name, $2 ttl ms, $3 locked_by, $4 token.
                create: outcome(format!(
                    "INSERT INTO {t} AS r (name, lock_until, locked_at, locked_by, {f}) \
                     VALUES ($1, {now} + {ttl}, {now}, $3, $4) ON CONFLICT (name) DO NOTHING RETURNING r.*"
                ))
                .into(),
                // + $5 at_us, $6 until_us, $7 old locked_by, $8 old fence.
                update: outcome(format!(
                    "UPDATE {t} AS r SET lock_until = {now} + {ttl}, locked_at = {now}, locked_by = $3, {f} = $4 \
                     WHERE r.name = $1 AND {at_r} = $5 AND {until_r} = $6 \
                     AND r.locked_by IS NOT DISTINCT FROM $7 AND r.{f} IS NOT DISTINCT FROM $8 RETURNING r.*"
                ))
                .into(),
                // $1 name, $2 ttl ms, $3 locked_by: the store issues the token.
                claim: outcome(format!(
                    "INSERT INTO {t} AS r (name, lock_until, locked_at, locked_by, {f}) \
                     VALUES ($1, {now} + {ttl}, {now}, $3, 1) ON CONFLICT (name) DO UPDATE \
                     SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, \
                     locked_by = EXCLUDED.locked_by, {f} = COALESCE(r.{f}, 1) + 1 \
                     WHERE (r.lock_until <= {now} OR r.locked_by = '') AND (r.{f} IS NULL OR r.{f} > 0) \
                     AND r.locked_at IS NOT NULL AND r.lock_until IS NOT NULL RETURNING r.*"
                ))
                .into(),
                // $1 name, $2 at_us, $3 until_us, $4 locked_by, $5 fence.
                delete: outcome(format!(
                    "DELETE FROM {t} AS r WHERE r.name = $1 AND {at_r} = $2 AND {until_r} = $3 \
                     AND r.locked_by IS NOT DISTINCT FROM $4 AND r.{f} IS NOT DISTINCT FROM $5 RETURNING r.*"
                ))
                .into(),
            },
            None => Self {
                read: read.into(),
                list,
                // $1 name, $2 ttl ms, $3 locked_by.
                create: outcome(format!(
                    "INSERT INTO {t} AS r (name, lock_until, locked_at, locked_by) \
                     VALUES ($1, {now} + {ttl}, {now}, $3) ON CONFLICT (name) DO NOTHING RETURNING r.*"
                ))
                .into(),
                // + $4 token, $5 at_us, $6 until_us, $7 old locked_by. The token is
                // locked_at: kept when the token is unchanged, else issued afresh (and
                // only if it grows).
                update: outcome(format!(
                    "UPDATE {t} AS r SET lock_until = {now} + {ttl}, \
                     locked_at = CASE WHEN {at_r} = $4 THEN r.locked_at ELSE {now} END, locked_by = $3 \
                     WHERE r.name = $1 AND {at_r} = $5 AND {until_r} = $6 \
                     AND r.locked_by IS NOT DISTINCT FROM $7 AND ({at_r} = $4 OR r.locked_at < {now}) RETURNING r.*"
                ))
                .into(),
                claim: outcome(format!(
                    "INSERT INTO {t} AS r (name, lock_until, locked_at, locked_by) \
                     VALUES ($1, {now} + {ttl}, {now}, $3) ON CONFLICT (name) DO UPDATE \
                     SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, \
                     locked_by = EXCLUDED.locked_by \
                     WHERE (r.lock_until <= {now} OR r.locked_by = '') AND r.locked_at < {now} \
                     AND r.lock_until IS NOT NULL RETURNING r.*"
                ))
                .into(),
                // $1 name, $2 at_us, $3 until_us, $4 locked_by.
                delete: outcome(format!(
                    "DELETE FROM {t} AS r WHERE r.name = $1 AND {at_r} = $2 AND {until_r} = $3 \
                     AND r.locked_by IS NOT DISTINCT FROM $4 RETURNING r.*"
                ))
                .into(),
            },
        }
    }
}
