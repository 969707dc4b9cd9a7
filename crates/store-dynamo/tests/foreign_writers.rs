//! Items written by other programs (an operator with boto3 or the AWS CLI, a restore, a
//! script): the lease store never undoes them, a holder notices them within one renewal
//! interval, and an item that cannot be valid is `CorruptRecord` on every path.
//!
//! The operator is a real AWS client: boto3 from the moto venv
//! (`leasehold_testkit::foreign::boto3`), with DynamoDB's typed JSON for values (what the
//! AWS CLI takes too).
//!
//! Policy (one for every store): an item is valid only if it is exactly what this crate
//! writes. A missing or mistyped attribute, a number out of its range (a token of 0, a
//! negative one or one beyond `u64`; a TTL outside `Ttl::MIN..=Ttl::MAX`; a wall-clock
//! expiry that is not a whole number in `u64`), an empty or invalid holder, an unknown
//! format, and an attribute the crate never writes (an unknown extra attribute, as
//! `record_codec` and Redis treat an unknown field) are all `CorruptRecord`.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use foreign::assert_corrupt as corrupt;
use leasehold_core::store::CasStore;
use leasehold_core::{LeaseClient, LeaseName};
use leasehold_dynamodb::DynamoStore;
use leasehold_testkit::foreign::{self, boto3};

/// The TTL of these tests' leases: renewals every 500 ms.
const TTL: Duration = Duration::from_millis(1_500);

/// Attributes as an operator sets them: each a name and its DynamoDB typed JSON value
/// (`("fence", r#"{"N": "100"}"#)`, as the AWS CLI takes it and boto3 prints it).
type Sets = &'static [(&'static str, &'static str)];

/// The JSON object of `sets`.
fn json_of(sets: &[(&str, &str)]) -> String {
    let parts: Vec<String> = sets.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// `SET`s `sets` on the existing item `name`, version untouched: `update-item` as an
/// operator runs it.
async fn update_item(table: &str, name: &str, sets: Sets) {
    update_item_json(table, name, &json_of(sets)).await;
}

/// [`update_item`] of the attributes of a JSON object.
async fn update_item_json(table: &str, name: &str, sets: &str) {
    boto3(
        "dynamodb",
        "table, name, sets = args[0], args[1], json.loads(args[2])\n\
         keys = list(sets)\n\
         client.update_item(TableName=table, Key={'lease': {'S': name}},\n\
             UpdateExpression='SET ' + ', '.join(f'#a{i} = :a{i}' for i in range(len(keys))),\n\
             ExpressionAttributeNames={f'#a{i}': k for i, k in enumerate(keys)},\n\
             ExpressionAttributeValues={f':a{i}': sets[k] for i, k in enumerate(keys)},\n\
             ConditionExpression='attribute_exists(lease)')\n",
        &[table, name, sets],
    )
    .await;
}

/// Puts each `(name, item)` of `items` (the item as DynamoDB typed JSON, without its key):
/// `put-item` as an operator or a restore runs it.
async fn put_items(table: &str, items: &[(String, String)]) {
    let script = "table = args[0]\n\
         for name, item in zip(args[1::2], args[2::2]):\n\
         \x20   item = json.loads(item)\n\
         \x20   item['lease'] = {'S': name}\n\
         \x20   client.put_item(TableName=table, Item=item)\n";
    foreign::boto3_pairs("dynamodb", script, table, items).await;
}

/// Deletes the item `name`: `delete-item`.
async fn delete_item(table: &str, name: &str) {
    boto3(
        "dynamodb",
        "client.delete_item(TableName=args[0], Key={'lease': {'S': args[1]}})\n",
        &[table, name],
    )
    .await;
}

/// The item `name` as boto3 reads it (consistently): each attribute as typed JSON, sorted,
/// one a line (`fence {"N": "100"}`); empty if there is no item.
async fn item_as_read(table: &str, name: &str) -> String {
    items_as_read(table, &[name.to_owned()]).await.remove(0)
}

/// [`item_as_read`] of each of `names`, in one run of boto3.
async fn items_as_read(table: &str, names: &[String]) -> Vec<String> {
    let mut args = vec![table];
    args.extend(names.iter().map(String::as_str));
    let out = boto3(
        "dynamodb",
        "for name in args[1:]:\n\
         \x20   item = client.get_item(TableName=args[0], Key={'lease': {'S': name}}, ConsistentRead=True).get('Item', {})\n\
         \x20   for k in sorted(item):\n\
         \x20       print(k, json.dumps(item[k], sort_keys=True))\n\
         \x20   print('--')\n",
        &args,
    )
    .await;
    let items: Vec<String> = out
        .split("--\n")
        .take(names.len())
        .map(|i| i.trim_end().to_owned())
        .collect();
    assert_eq!(items.len(), names.len(), "boto3 printed {out}");
    items
}

/// The attribute `attr` of `item` (as [`item_as_read`] gives it).
fn attr<'a>(item: &'a str, attr: &str) -> Option<&'a str> {
    item.lines()
        .find_map(|l| l.split_once(' ').filter(|(k, _)| *k == attr).map(|(_, v)| v))
}

/// Holds `name`, lets the operator `SET` `sets` during the tenure, and checks what every
/// such change must give: the holder loses the lease within one renewal interval, with
/// `LossCause::TakenOver` naming what the operator wrote; the item keeps every
/// attribute the operator wrote (no renewal, no release writes it back); the next grant's
/// token is above the highest the item ever held.
async fn changed_during_tenure(sets: Sets, expect_holder: Option<&str>, highest: u64) {
    let (_admin, table) = common::fresh_lease_table("foreign").await;
    let store = common::store_on(&table);
    let name = common::unique_name("foreign", "changed");
    let what = format!("{sets:?}");
    let change = update_item(&table, &name, sets);
    let kept = |lease: leasehold_core::Lease| async {
        // Releasing the lost lease must not write anything back either.
        lease.release().await.expect("release of the lost lease");
        let item = item_as_read(&table, &name).await;
        for (k, v) in sets {
            assert_eq!(
                attr(&item, k),
                Some(*v),
                "{what}: the item lost the operator's {k}; it is now:\n{item}"
            );
        }
    };
    foreign::assert_changed_by_hand(&store, &name, TTL, change, (expect_holder, highest), &what, kept).await;
}

/// An operator raises a held lease's token by hand (`update-item … SET fence = 100`, the
/// version untouched). The holder's renewal must not write its own token back: it loses
/// the lease at its next renewal, the item keeps 100, the next grant is 101.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_token_is_never_written_back() {
    changed_during_tenure(&[("fence", r#"{"N": "100"}"#)], None, 100).await;
}

/// An operator changes a held lease's holder by hand (`SET holder = …`, version and token
/// untouched). The holder's renewal must not write itself back over it: it loses the
/// lease (taken over by the operator's holder) and the item keeps the operator's holder.
/// Failed before the fix (a renewal only required the version, and wrote the holder back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_holder_is_never_written_back() {
    changed_during_tenure(
        &[("holder", r#"{"S": "operator-by-hand"}"#)],
        Some("operator-by-hand"),
        1,
    )
    .await;
}

/// The same with both changed at once (`SET holder = …, fence = 50`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_holder_and_token_are_never_written_back() {
    changed_during_tenure(
        &[
            ("fence", r#"{"N": "50"}"#),
            ("holder", r#"{"S": "restored-from-backup"}"#),
        ],
        Some("restored-from-backup"),
        50,
    )
    .await;
}

/// An operator deletes a held lease's item (`delete-item`). The holder notices at its
/// next renewal (`Expired`: the conditional write finds no item), and neither that
/// renewal nor the release of the lost lease creates the item again.
///
/// The item is the only record DynamoDB keeps of a name, so after a delete the store
/// cannot know the tokens it issued: the next grant starts again at 1 (asserted here,
/// so that a change of this is seen). Tokens go backwards only through an operator's
/// delete; never delete a lease item by hand (release it, or leave it vacant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_item_is_noticed_and_never_recreated() {
    let (_admin, table) = common::fresh_lease_table("foreign-del").await;
    let store = common::store_on(&table);
    let name = common::unique_name("foreign", "deleted");
    foreign::assert_deleted_by_hand(&store, &name, TTL, delete_item(&table, &name), || async {
        item_as_read(&table, &name).await.is_empty()
    })
    .await;
}

/// Items that cannot be valid, as an operator or a bad restore could leave them: each an
/// attribute and the value (DynamoDB typed JSON) set over a valid held item.
const CORRUPTIONS: [(&str, &str, &str); 15] = [
    ("a token that is a string", "fence", r#"{"S": "7"}"#),
    ("a token of 0", "fence", r#"{"N": "0"}"#),
    ("a negative token", "fence", r#"{"N": "-3"}"#),
    (
        "a token beyond u64",
        "fence",
        r#"{"N": "123456789012345678901234567890"}"#,
    ),
    ("a fractional token", "fence", r#"{"N": "1.5"}"#),
    ("a TTL of 0", "ttl_ms", r#"{"N": "0"}"#),
    ("a TTL beyond Ttl::MAX", "ttl_ms", r#"{"N": "99999999999999999999"}"#),
    ("a TTL that is a string", "ttl_ms", r#"{"S": "1500"}"#),
    ("an empty holder", "holder", r#"{"S": ""}"#),
    ("a holder that is a number", "holder", r#"{"N": "1"}"#),
    ("a negative wall-clock expiry", "wall_expires_at_ms", r#"{"N": "-1"}"#),
    (
        "a wall-clock expiry beyond u64",
        "wall_expires_at_ms",
        r#"{"N": "99999999999999999999"}"#,
    ),
    (
        "a wall-clock expiry that is a boolean",
        "wall_expires_at_ms",
        r#"{"BOOL": true}"#,
    ),
    ("an unknown format", "format", r#"{"N": "2"}"#),
    ("an unknown extra attribute", "note", r#"{"S": "set by hand"}"#),
];

/// A grant of `name` reports `CorruptRecord` at once (never granted, never waited on).
async fn grant_is_corrupt(store: &DynamoStore, name: &str, what: &str) {
    foreign::assert_grants_corrupt(&LeaseClient::new(store.clone()), name, TTL, what).await;
}

/// An operator corrupts a held item during a tenure (each of [`CORRUPTIONS`], by
/// `update-item`). The holder's next renewal notices (the loss fires within one renewal
/// interval, as a store error saying the record is corrupt) and never heals it; the
/// release of the lost lease reports `CorruptRecord`; reads and grants report
/// `CorruptRecord` at once; the item keeps the operator's value.
///
/// An unknown extra attribute cannot be excluded by a condition expression: a renewal
/// on such an item applies (it changes only the lease's own attributes, the extra one
/// stays) and then reports the item it returns as corrupt, so the holder loses the
/// lease all the same. Failed before the fix (an extra attribute was ignored: read and
/// renewal succeeded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_item_corrupted_by_hand_is_corrupt_on_every_path() {
    let (_admin, table) = common::fresh_lease_table("foreign-corrupt").await;
    let store = common::store_on(&table);
    let names: Vec<String> = CORRUPTIONS
        .iter()
        .map(|_| common::unique_name("foreign", "corrupt"))
        .collect();
    // One operator's script corrupts every item, each as its case says.
    let mut args = vec![table.as_str()];
    for ((_, attr_name, value), name) in CORRUPTIONS.iter().zip(&names) {
        args.extend([name.as_str(), attr_name, value]);
    }
    let change = boto3(
        "dynamodb",
        "for name, attr, value in zip(args[1::3], args[2::3], args[3::3]):\n\
         \x20   client.update_item(TableName=args[0], Key={'lease': {'S': name}},\n\
         \x20       UpdateExpression='SET #a = :a', ExpressionAttributeNames={'#a': attr},\n\
         \x20       ExpressionAttributeValues={':a': json.loads(value)}, ConditionExpression='attribute_exists(lease)')\n",
        &args,
    );
    let whats: Vec<&str> = CORRUPTIONS.iter().map(|(what, _, _)| *what).collect();
    let causes = foreign::assert_corrupted_by_hand(&store, &names, &whats, TTL, async {
        change.await;
    })
    .await;
    let items = items_as_read(&table, &names).await;
    for (((what, attr_name, value), item), cause) in CORRUPTIONS.iter().zip(&items).zip(&causes) {
        assert_eq!(
            attr(item, attr_name),
            Some(*value),
            "{what}: the operator's value was overwritten ({cause:?}); the item is now:\n{item}"
        );
    }
}

/// Items put whole by an operator or a restore that cannot be valid (each of
/// [`CORRUPTIONS`] over a valid held item, plus items missing an attribute): never
/// granted, never waited on, `CorruptRecord` on read and on every grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_put_corrupt_is_never_granted() {
    let (_admin, table) = common::fresh_lease_table("foreign-put").await;
    let store = common::store_on(&table);
    let valid = [
        ("holder", r#"{"S": "w1"}"#),
        ("fence", r#"{"N": "7"}"#),
        ("ttl_ms", r#"{"N": "1500"}"#),
        ("wall_expires_at_ms", r#"{"N": "1700000000000"}"#),
        ("version", r#"{"S": "0123456789abcdef0123456789abcdef"}"#),
        ("format", r#"{"N": "1"}"#),
    ];
    let with = |attr: &str, value: Option<&str>| {
        let mut parts: Vec<String> = valid
            .iter()
            .filter(|(k, _)| *k != attr)
            .map(|(k, v)| format!("\"{k}\": {v}"))
            .collect();
        if let Some(v) = value {
            parts.push(format!("\"{attr}\": {v}"));
        }
        format!("{{{}}}", parts.join(", "))
    };
    let mut cases: Vec<(String, String)> = CORRUPTIONS
        .iter()
        .map(|(what, attr_name, value)| ((*what).to_owned(), with(attr_name, Some(value))))
        .collect();
    for missing in ["fence", "ttl_ms", "version", "format"] {
        cases.push((format!("no {missing}"), with(missing, None)));
    }
    let names: Vec<String> = cases.iter().map(|_| common::unique_name("foreign", "put")).collect();
    let items: Vec<(String, String)> = names.iter().cloned().zip(cases.iter().map(|c| c.1.clone())).collect();
    put_items(&table, &items).await;
    // The valid item itself is granted after its TTL: the cases differ from it only in
    // what makes them corrupt.
    let control = common::unique_name("foreign", "put-valid");
    put_items(&table, &[(control.clone(), with("note", None))]).await;
    for ((what, _), name) in cases.iter().zip(&names) {
        let key = LeaseName::new(name).expect("name");
        corrupt(what, "read", store.read(&key).await);
        grant_is_corrupt(&store, name, what).await;
    }
    // A new client, which waits out the record (its TTL plus margin, by observation).
    let client = LeaseClient::new(store.clone());
    foreign::assert_next_token(&client, &control, TTL, 8, "the valid item was not taken over").await;
}

/// Vacant items that a condition cannot tell from valid ones (an attribute this crate
/// never writes, a fractional token): a new client's claim, which sends no read first,
/// applies, finds the item it replaced corrupt, puts it back and reports it. The item
/// is as the operator left it; reads and later grants report it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacant_item_corrupt_beyond_a_condition_is_put_back_as_it_was() {
    let (_admin, table) = common::fresh_lease_table("foreign-vacant").await;
    let store = common::store_on(&table);
    let vacant = r#""fence": {"N": "7"}, "ttl_ms": {"N": "1500"}, "version": {"S": "0123456789abcdef0123456789abcdef"}, "format": {"N": "1"}"#;
    let cases = [
        (
            "an unknown extra attribute",
            format!(r#"{{{vacant}, "note": {{"S": "set by hand"}}}}"#),
        ),
        (
            "a fractional token",
            format!(
                "{{{}}}",
                vacant.replace(r#""fence": {"N": "7"}"#, r#""fence": {"N": "6.5"}"#)
            ),
        ),
    ];
    let names: Vec<String> = cases.iter().map(|_| common::unique_name("foreign", "vacant")).collect();
    let items: Vec<(String, String)> = names.iter().cloned().zip(cases.iter().map(|c| c.1.clone())).collect();
    put_items(&table, &items).await;
    let before = items_as_read(&table, &names).await;
    for ((what, _), name) in cases.iter().zip(&names) {
        grant_is_corrupt(&store, name, what).await;
        corrupt(what, "read", store.read(&LeaseName::new(name).expect("name")).await);
    }
    assert_eq!(
        items_as_read(&table, &names).await,
        before,
        "a claim changed a corrupt vacant item"
    );
}

/// The shared cases of `leasehold_testkit::edits`, edited with boto3's `update_item`
/// (DynamoDB's version attribute does not move).
async fn editor() -> leasehold_testkit::edits::Editor {
    let (_admin, table) = common::fresh_lease_table("edits").await;
    leasehold_testkit::edits::Editor::new(common::store_on(&table), move |name, field, value| {
        let (attr, kind) = field.pick(("holder", "S"), ("fence", "N"));
        let sets = format!(r#"{{"{attr}": {{"{kind}": "{value}"}}}}"#);
        let table = table.clone();
        async move { update_item_json(&table, &name, &sets).await }
    })
}

leasehold_testkit::editor_cases!(editor(); all);

/// `list` on a table other programs also write: an item whose key is no valid lease
/// name (nothing can read it as a lease) is not listed; one under a valid name is,
/// whatever its attributes, as `read` reports it (here corrupt). A handful of names on
/// a small table is one `Scan`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_skips_items_that_are_no_lease_name() {
    let (admin, table) = common::fresh_lease_table("foreign-list").await;
    let http = leasehold_aws::SentRequests::default();
    let store = DynamoStore::new(
        common::client(Some(&http)),
        leasehold_dynamodb::DynamoConfig::new(&table).expect("config"),
    );
    let base = common::unique_name("foreign", "list");
    for n in ["a", "b"] {
        let name = LeaseName::new(format!("{base}/{n}")).expect("name");
        let record = leasehold_core::store::LeaseRecord::held(
            leasehold_core::HolderId::new("lister").expect("holder"),
            leasehold_core::FencingToken::new(1),
            leasehold_core::Ttl::from_millis(60_000).expect("ttl"),
        );
        let written = store
            .write(&name, &leasehold_core::store::Precondition::Absent, &record)
            .await
            .expect("write");
        assert!(
            matches!(written, leasehold_core::store::CasOutcome::Written(_)),
            "{written:?}"
        );
    }
    let other_app = r#"{"owner": {"S": "another application"}}"#.to_owned();
    let foreign: Vec<(String, String)> = ["has space", "", "x//y", "./x", "by-hand"]
        .iter()
        .map(|k| (format!("{base}/{k}"), other_app.clone()))
        .collect();
    put_items(&table, &foreign).await;

    let prefix = leasehold_core::NamePrefix::new(format!("{base}/")).expect("prefix");
    http.reset();
    let listed = store.list(&prefix).await.expect("list");
    assert_eq!(http.total(), 1, "one Scan");
    let listed: Vec<&str> = listed.iter().map(LeaseName::as_str).collect();
    let expected = [format!("{base}/a"), format!("{base}/b"), format!("{base}/by-hand")];
    assert_eq!(listed, expected);
    let by_hand = LeaseName::new(&expected[2]).expect("name");
    corrupt("an item of another application", "read", store.read(&by_hand).await);
    common::delete_table(&admin, &table).await;
}
