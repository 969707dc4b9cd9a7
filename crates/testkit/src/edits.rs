//! Foreign-writer cases every store runs the same way, through an [`Editor`]: an
//! operator changing a record with the store's own command-line client. A release never
//! undoes what the operator set ([`a_release_leaves_a_changed_holder`],
//! [`a_release_leaves_a_raised_token`]), and the token counter ends at
//! [`FencingToken::MAX`] ([`the_last_token_is_granted_once`],
//! [`a_token_above_max_is_corrupt_on_every_path`]).
//!
//! Run them with [`editor_cases!`](crate::editor_cases).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use leasehold_core::store::{CasStore, LeaseRecord, Linearizable, Version};
use leasehold_core::{Error, FencingToken, LeaseClient, LeaseName, LossCause};
use tokio::time::Instant;

use crate::foreign::{assert_corrupt, assert_grants_corrupt};

/// The TTL of a tenure during which the operator edits the record: the first renewal is
/// due a third of it after the grant, long after the edit and the release that follow.
pub const EDIT_TTL: Duration = Duration::from_secs(9);

/// The first token above [`FencingToken::MAX`] (`i64::MAX`: every store's token column
/// holds it), as an operator types it.
pub const ABOVE_MAX: &str = "9223372036854775807";

/// Which field of a record the operator sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The holder.
    Holder,
    /// The fencing token.
    Token,
}

impl Field {
    /// `holder` for [`Field::Holder`], `token` for [`Field::Token`]: the store's name (or
    /// encoding) of each.
    pub fn pick<T>(self, holder: T, token: T) -> T {
        match self {
            Self::Holder => holder,
            Self::Token => token,
        }
    }

    /// `json`, a record's compact JSON as the stores that keep JSON write it, with this
    /// field set to `value` (a holder id, quoted; or a token's digits): `"field":value`
    /// replaced up to the next `,` or `}`, as an operator edits it by hand.
    ///
    /// # Panics
    /// If `json` has no such field.
    pub fn set_in_json(self, json: &str, value: &str) -> String {
        let (f, v) = self.pick(
            ("\"holder\":", format!("\"{value}\"")),
            ("\"token\":", value.to_owned()),
        );
        let at = json.find(f).unwrap_or_else(|| panic!("no {f} in {json}")) + f.len();
        let end = at + json[at..].find([',', '}']).unwrap_or_else(|| panic!("{json}"));
        format!("{}{v}{}", &json[..at], &json[end..])
    }
}

/// The operator's edit: sets `field` of the existing record `name` to `value` (a holder
/// id, or a token's decimal digits), with the store's own command-line client.
type Edit = dyn Fn(String, Field, String) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// A store under test and an operator who edits its records with the store's own
/// command-line client (`psql`, `sqlite3`, `mariadb`, `redis-cli`, `etcdctl`, boto3).
pub struct Editor {
    store: Arc<dyn CasStore>,
    client: Box<dyn Fn() -> LeaseClient + Send + Sync>,
    edit: Box<Edit>,
}

impl Editor {
    /// `store`, for correctness leases, edited by `edit` (which sets `field` of the record
    /// `name` to `value`: a holder id, or a token's decimal digits).
    pub fn new<S, F>(store: S, edit: impl Fn(String, Field, String) -> F + Send + Sync + 'static) -> Self
    where
        S: Linearizable + Clone,
        F: Future<Output = ()> + Send + 'static,
    {
        let own = store.clone();
        Self::with_client(store, move || LeaseClient::new(own.clone()), edit)
    }

    /// [`Editor::new`] with the clients `client` makes (an efficiency-only store's).
    pub fn with_client<S, F>(
        store: S,
        client: impl Fn() -> LeaseClient + Send + Sync + 'static,
        edit: impl Fn(String, Field, String) -> F + Send + Sync + 'static,
    ) -> Self
    where
        S: CasStore + Clone,
        F: Future<Output = ()> + Send + 'static,
    {
        Self {
            store: Arc::new(store),
            client: Box::new(client),
            edit: Box::new(move |name, field, value| Box::pin(edit(name, field, value))),
        }
    }

    /// A SQL lease table `table` of `store`, edited with `UPDATE` statements that `run`
    /// executes as the database's shell would (identifiers quoted the standard way).
    pub fn sql<S: Linearizable + Clone>(store: S, table: String, run: impl Fn(&str) + Send + Sync + 'static) -> Self {
        Self::new(store, move |name, field, value| {
            let set = field.pick(format!("holder = '{value}'"), format!("fence_token = {value}"));
            run(&format!("UPDATE \"{table}\" SET {set} WHERE name = '{name}'"));
            std::future::ready(())
        })
    }

    fn store(&self) -> &dyn CasStore {
        self.store.as_ref()
    }

    fn client(&self) -> LeaseClient {
        (self.client)()
    }

    async fn set_holder(&self, name: &str, holder: &str) {
        (self.edit)(name.to_owned(), Field::Holder, holder.to_owned()).await;
    }

    async fn set_token(&self, name: &str, token: &str) {
        (self.edit)(name.to_owned(), Field::Token, token.to_owned()).await;
    }
}

/// The record of `name` and its version, as the store reads it now.
async fn record_of(e: &Editor, name: &str) -> (LeaseRecord, Version) {
    let key = LeaseName::new(name).expect("name");
    let s = e.store().read(&key).await.expect("read").expect("the record");
    (s.record, s.version)
}

/// A name no other case or run uses.
fn unique(case: &str) -> String {
    format!("edits/{case}/{}", crate::unique_suffix())
}

/// Holds `name` for [`EDIT_TTL`], has the operator `edit` the record, releases, and
/// returns the record as the operator left it and as it is after the release (with their
/// versions), and the holder's id.
async fn release_after(
    e: &Editor,
    name: &str,
    edit: impl Future<Output = ()>,
) -> ((LeaseRecord, Version), (LeaseRecord, Version), String) {
    let lease = e.client().acquire(name, EDIT_TTL).await.expect("acquire");
    assert_eq!(lease.token(), FencingToken::FIRST);
    let me = lease.holder().as_str().to_owned();
    edit.await;
    let edited = record_of(e, name).await;
    // No renewal has run yet (the first is due EDIT_TTL / 3 after the grant): the
    // release below is sent to the store, not answered from a loss the driver saw.
    assert_eq!(
        lease.loss_cause(),
        None,
        "a renewal noticed the edit before the release"
    );
    lease
        .release()
        .await
        .expect("a release with nothing left to release is Ok");
    (edited, record_of(e, name).await, me)
}

/// The next grant of `name` by a new client: it waits out the record the operator left.
async fn next_token(e: &Editor, name: &str) -> FencingToken {
    let lease = e
        .client()
        .acquire_timeout(name, EDIT_TTL, EDIT_TTL * 3)
        .await
        .unwrap_or_else(|err| panic!("{name}: the next grant failed: {err}"));
    let token = lease.token();
    lease.release().await.expect("release");
    token
}

/// An operator gives a held lease to someone else (its version untouched where the
/// store allows it). The holder's release finds another holder: it returns `Ok`, leaves
/// the record exactly as the operator left it (no vacating of someone else's lease), and
/// the next grant's token is above the record's.
pub async fn a_release_leaves_a_changed_holder(e: &Editor) {
    let name = unique("holder");
    let (edited, after, me) = release_after(e, &name, e.set_holder(&name, "the-operator")).await;
    assert_eq!(
        edited.0.holder.as_ref().map(|h| h.as_str()),
        Some("the-operator"),
        "the operator's edit did not land"
    );
    assert_ne!(me, "the-operator");
    assert_eq!(after, edited, "the release undid the operator's change of holder");
    assert_eq!(next_token(e, &name).await, FencingToken::new(2));
}

/// An operator raises a held lease's token. The holder's release finds another token: it
/// returns `Ok`, leaves the record as the operator left it (never writes its lower token
/// back), and the next grant is above the raised token.
pub async fn a_release_leaves_a_raised_token(e: &Editor) {
    let name = unique("token");
    let (edited, after, _) = release_after(e, &name, e.set_token(&name, "100")).await;
    assert_eq!(
        edited.0.token,
        FencingToken::new(100),
        "the operator's edit did not land"
    );
    assert_eq!(after, edited, "the release undid the operator's raised token");
    assert_eq!(next_token(e, &name).await, FencingToken::new(101));
}

/// The TTL of the token-counter cases: long enough that no record they leave expires
/// while they look at it.
const CAP_TTL: Duration = Duration::from_secs(30);

/// A vacant record of `name` with token `token`, planted by the operator on a record the
/// library made (acquired and released).
async fn vacant_at(e: &Editor, name: &str, token: &str) {
    let lease = e.client().acquire(name, CAP_TTL).await.expect("acquire");
    lease.release().await.expect("release");
    e.set_token(name, token).await;
}

/// Panics unless every way of acquiring `name` (a client that has seen its record, and
/// one that has not) reports [`Error::TokensExhausted`] at once, and the record is left
/// as it was.
async fn assert_exhausted(e: &Editor, name: &str, seen: &LeaseClient) {
    let before = record_of(e, name).await;
    let started = Instant::now();
    for client in [seen, &e.client()] {
        match client.try_acquire(name, CAP_TTL).await {
            Err(Error::TokensExhausted { name: n }) => assert_eq!(n, name),
            other => panic!("{name}: try_acquire at the last token gives {other:?}"),
        }
        match client.acquire_timeout(name, CAP_TTL, Duration::from_secs(10)).await {
            Err(Error::TokensExhausted { .. }) => {}
            other => panic!("{name}: acquire at the last token gives {:?}", other.map(|l| l.token())),
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{name}: a grant waited {:?} on an exhausted counter",
        started.elapsed()
    );
    assert_eq!(record_of(e, name).await, before, "a refused grant changed the record");
}

/// The counter's end, on a record an operator set to one below [`FencingToken::MAX`]:
/// the next grant issues `MAX` (renewed and released as any other), and every grant
/// after it is [`Error::TokensExhausted`], never the same token again, with nothing
/// changed. A record the operator set to `MAX` itself is refused the same way.
pub async fn the_last_token_is_granted_once(e: &Editor) {
    let name = unique("last");
    let below = FencingToken::MAX.get() - 1;
    vacant_at(e, &name, &below.to_string()).await;
    assert_eq!(record_of(e, &name).await.0.token.get(), below);
    let client = e.client();
    let last = client
        .acquire(&name, CAP_TTL)
        .await
        .expect("the grant of the last token");
    assert_eq!(last.token(), FencingToken::MAX);
    last.release().await.expect("the last token is released as any other");
    let (vacant, _) = record_of(e, &name).await;
    assert!(vacant.is_vacant() && vacant.token == FencingToken::MAX, "{vacant:?}");
    assert_exhausted(e, &name, &client).await;

    let planted = unique("max");
    vacant_at(e, &planted, &FencingToken::MAX.to_string()).await;
    assert_exhausted(e, &planted, &e.client()).await;
}

/// A token above [`FencingToken::MAX`], planted by the operator, is
/// [`Error::CorruptRecord`] on every path: the holder's renewal ends its lease with the
/// store's error, its release reports the record corrupt, and reads and grants do too
/// (at once, never waiting on it).
pub async fn a_token_above_max_is_corrupt_on_every_path(e: &Editor) {
    let name = unique("above");
    let client = e.client();
    let ttl = Duration::from_secs(2);
    let (cause, _, lease) =
        crate::foreign::hold_then(&client, &name, ttl, async { e.set_token(&name, ABOVE_MAX).await }).await;
    assert!(
        matches!(&cause, LossCause::StoreError(m) if m.contains("corrupt")),
        "a renewal on a token above MAX: {cause:?}"
    );
    assert_corrupt("a held token above MAX", "release", lease.release().await);
    let key = LeaseName::new(&name).expect("name");
    assert_corrupt("a token above MAX", "read", e.store().read(&key).await);
    assert_grants_corrupt(&client, &name, ttl, "a token above MAX").await;
    assert_grants_corrupt(&e.client(), &name, ttl, "a token above MAX").await;
}

/// One `#[tokio::test]` per named case of this module, each on the [`Editor`] that
/// `$editor` (an expression giving a future of one) builds:
///
/// ```text
/// leasehold_testkit::editor_cases!(my_editor();
///     a_release_leaves_a_changed_holder, the_last_token_is_granted_once);
/// leasehold_testkit::editor_cases!(my_editor(); all);
/// ```
#[macro_export]
macro_rules! editor_cases {
    // Every case of this module.
    ($editor:expr; all) => {
        $crate::editor_cases!($editor;
            a_release_leaves_a_changed_holder,
            a_release_leaves_a_raised_token,
            a_token_above_max_is_corrupt_on_every_path,
            the_last_token_is_granted_once,
        );
    };
    ($editor:expr; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let editor: $crate::edits::Editor = $editor.await;
                $crate::edits::$case(&editor).await;
            }
        )+
    };
}

/// [`editor_cases!`] for a SQL store's tests: every case, on the lease table
/// `common::foreign_store()` gives, edited with `common::operator` (the database's own
/// shell).
#[macro_export]
macro_rules! sql_editor_cases {
    () => {
        $crate::editor_cases!(
            async {
                let (store, table, keep) = common::foreign_store().await;
                $crate::edits::Editor::sql(store, table, move |sql: &str| common::operator(&keep, sql))
            };
            all
        );
    };
}
