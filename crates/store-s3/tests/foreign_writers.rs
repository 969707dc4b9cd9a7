//! Lease objects written by other programs (an operator with boto3 or the AWS CLI, a
//! restore, a sync job): the lease store never undoes them, a holder notices them within
//! one renewal interval, and a body that cannot be a record is `CorruptRecord` on every
//! path.
//!
//! The operator is a real AWS client: boto3 from the moto venv
//! (`leasehold_testkit::foreign::boto3`), with `put_object` and `delete_object` on the
//! lease's object `<prefix>/<name>`. Every write of the object, foreign or not, gives it a
//! new ETag, so a holder's renewal (`PutObject` with `If-Match` on the ETag it wrote) is
//! refused after any foreign write and reads what is there.
//!
//! Policy (one for every store): a body is valid only if it is exactly a record as
//! `record_codec` writes it: JSON with the fields `f` (format 1), `holder` (absent or
//! null while vacant, else a valid holder id), `token` (1..=u64::MAX), `ttl_ms`
//! (`Ttl::MIN..=Ttl::MAX`) and optionally `wall_exp_ms` (a whole number in `u64`). Any
//! other field, type or value is `CorruptRecord`, as is an object larger than
//! `MAX_RECORD_BYTES`.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use foreign::assert_corrupt as corrupt;
use leasehold_core::store::CasStore;
use leasehold_core::{LeaseClient, LeaseName};
use leasehold_s3::S3Store;
use leasehold_testkit::foreign::{self, boto3};

/// The TTL of these tests' leases: renewals every 500 ms.
const TTL: Duration = Duration::from_millis(1_500);

/// A store on a fresh bucket of the shared moto, and the bucket's name.
async fn fresh_store(tag: &str) -> (S3Store, String) {
    let bucket = common::unique_bucket(tag);
    (common::store_in(&common::endpoint(), &bucket).await, bucket)
}

/// A lease name no other test uses, and its object key.
fn unique(store: &S3Store, case: &str) -> (String, String) {
    let name = format!("foreign/{case}/{}", leasehold_testkit::unique_suffix());
    let key = store.key_for(&LeaseName::new(&name).expect("name"));
    (name, key)
}

/// Puts each `(key, body)` of `objects` into `bucket`: `put-object` as an operator, a
/// restore or a sync job runs it.
async fn put_objects(bucket: &str, objects: &[(String, String)]) {
    let script = "for key, body in zip(args[1::2], args[2::2]):\n\
         \x20   client.put_object(Bucket=args[0], Key=key, Body=body.encode(), ContentType='application/json')\n";
    foreign::boto3_pairs("s3", script, bucket, objects).await;
}

/// Edits the record in the object `key` as an operator would: reads its JSON, sets the
/// fields of `patch` (a JSON object) and puts it back.
async fn edit_object(bucket: &str, key: &str, patch: &str) {
    boto3(
        "s3",
        "body = json.loads(client.get_object(Bucket=args[0], Key=args[1])['Body'].read())\n\
         body.update(json.loads(args[2]))\n\
         client.put_object(Bucket=args[0], Key=args[1], Body=json.dumps(body).encode())\n",
        &[bucket, key, patch],
    )
    .await;
}

/// Deletes the object `key`: `delete-object`.
async fn delete_object(bucket: &str, key: &str) {
    boto3(
        "s3",
        "client.delete_object(Bucket=args[0], Key=args[1])\n",
        &[bucket, key],
    )
    .await;
}

/// The body of the object `key` as boto3 reads it, with its nonce (trailing whitespace)
/// trimmed; `None` if there is no object.
async fn body_of(bucket: &str, key: &str) -> Option<String> {
    bodies_of(bucket, &[key.to_owned()]).await.remove(0)
}

/// [`body_of`] each of `keys`, in one run of boto3.
async fn bodies_of(bucket: &str, keys: &[String]) -> Vec<Option<String>> {
    let mut args = vec![bucket];
    args.extend(keys.iter().map(String::as_str));
    let out = boto3(
        "s3",
        "for key in args[1:]:\n\
         \x20   try:\n\
         \x20       body = client.get_object(Bucket=args[0], Key=key)['Body'].read()\n\
         \x20   except client.exceptions.NoSuchKey:\n\
         \x20       print(json.dumps(None))\n\
         \x20   else:\n\
         \x20       print(json.dumps(body.decode().rstrip()))\n",
        &args,
    )
    .await;
    let bodies: Vec<Option<String>> = out.lines().map(unquote).collect();
    assert_eq!(bodies.len(), keys.len(), "boto3 printed {out}");
    bodies
}

/// A line `json.dumps` printed: `null` or a JSON string (the bodies here escape only `"`
/// and `\\`, and control characters boto3 never sees in them).
fn unquote(line: &str) -> Option<String> {
    if line == "null" {
        return None;
    }
    let inner = line
        .strip_prefix('"')
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("not a JSON string: {line}"));
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('"' | '\\' | '/')) => out.push(e),
                other => panic!("unexpected escape {other:?} in {line}"),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Holds a lease, lets an operator edit its record (`patch`, by `get-object` and
/// `put-object`) during the tenure, and checks what every such change must give: the
/// holder loses the lease within one renewal interval, with `LossCause::TakenOver`
/// naming what the operator wrote; the object keeps the operator's body (no renewal and
/// no release writes over it); the next grant's token is above the highest the object
/// ever held.
async fn edited_during_tenure(patch: &str, expect_holder: Option<&str>, highest: u64) {
    let (store, bucket) = fresh_store("foreign").await;
    let (name, key) = unique(&store, "edited");
    let change = edit_object(&bucket, &key, patch);
    let kept = |lease: leasehold_core::Lease| async {
        let written = body_of(&bucket, &key).await.expect("the operator's object");
        lease.release().await.expect("release of the lost lease");
        assert_eq!(
            body_of(&bucket, &key).await.as_deref(),
            Some(written.as_str()),
            "{patch}: the release wrote over the operator's object"
        );
        for field in patch.trim_matches(['{', '}']).split(", ") {
            assert!(written.contains(field), "{patch}: the object lost {field}: {written}");
        }
    };
    foreign::assert_changed_by_hand(&store, &name, TTL, change, (expect_holder, highest), patch, kept).await;
}

/// An operator raises a held lease's token (edits the JSON: `"token": 100`). The holder
/// loses the lease at its next renewal, the object keeps 100, the next grant is 101.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_token_is_never_written_back() {
    edited_during_tenure(r#"{"token": 100}"#, None, 100).await;
}

/// An operator changes a held lease's holder (token untouched). The holder loses the
/// lease, taken over by the operator's holder, and never writes itself back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_holder_is_never_written_back() {
    edited_during_tenure(r#"{"holder": "operator-by-hand"}"#, Some("operator-by-hand"), 1).await;
}

/// The same with both changed at once (a restore of an older or another record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_holder_and_token_are_never_written_back() {
    edited_during_tenure(
        r#"{"holder": "restored-from-backup", "token": 50}"#,
        Some("restored-from-backup"),
        50,
    )
    .await;
}

/// An operator deletes a held lease's object (`delete-object`). The holder notices at its
/// next renewal (`Expired`: `If-Match` finds no object), and neither that renewal nor
/// the release of the lost lease creates the object again.
///
/// The object is the only record S3 keeps of a name, so after a delete the store cannot
/// know the tokens it issued: the next grant starts again at 1 (asserted here, so that a
/// change of this is seen). Tokens go backwards only through an operator's delete; never
/// delete a lease object by hand (and keep lifecycle rules off the lease prefix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_object_is_noticed_and_never_recreated() {
    let (store, bucket) = fresh_store("foreign-del").await;
    let (name, key) = unique(&store, "deleted");
    foreign::assert_deleted_by_hand(&store, &name, TTL, delete_object(&bucket, &key), || async {
        body_of(&bucket, &key).await.is_none()
    })
    .await;
}

/// The JSON of a valid held record (holder `w1`, token 7, TTL 1.5 s) with `fields`
/// changed: each replaces the field of its name (`"<none>"` leaves it out) or is added.
fn record(fields: &[(&str, &str)]) -> String {
    let mut all: Vec<(&str, &str)> = vec![
        ("f", "1"),
        ("holder", "\"w1\""),
        ("token", "7"),
        ("ttl_ms", "1500"),
        ("wall_exp_ms", "1700000000000"),
    ];
    for (k, v) in fields {
        match all.iter_mut().find(|(name, _)| name == k) {
            Some(slot) if *v == "<none>" => slot.1 = "<none>",
            Some(slot) => slot.1 = v,
            None => all.push((k, v)),
        }
    }
    let parts: Vec<String> = all
        .iter()
        .filter(|(_, v)| *v != "<none>")
        .map(|(k, v)| format!("\"{k}\": {v}"))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Fields of a valid record (see [`record`]) that make it no record: each case, the
/// field, and its value in the JSON (`"<none>"` leaves the field out).
const BAD_FIELDS: [(&str, &str, &str); 16] = [
    ("a token that is a string", "token", "\"7\""),
    ("a token of 0", "token", "0"),
    ("a negative token", "token", "-1"),
    ("a token beyond u64", "token", "123456789012345678901234567890"),
    ("a fractional token", "token", "1.5"),
    ("no token", "token", "<none>"),
    ("an empty holder", "holder", "\"\""),
    ("a holder with a space", "holder", "\"has space\""),
    ("a holder that is a number", "holder", "1"),
    ("a TTL of 0", "ttl_ms", "0"),
    ("a TTL beyond Ttl::MAX", "ttl_ms", "18446744073709551615"),
    ("a TTL that is a string", "ttl_ms", "\"1500\""),
    ("a wall-clock expiry beyond u64", "wall_exp_ms", "1e30"),
    ("a negative wall-clock expiry", "wall_exp_ms", "-1"),
    ("an unknown format", "f", "2"),
    ("an unknown extra field", "note", "\"set by hand\""),
];

/// Bodies that cannot be a record, as an operator, a restore or another program could
/// leave them: no JSON object at all, each of [`BAD_FIELDS`], and a body too large.
fn corrupt_bodies() -> Vec<(&'static str, String)> {
    let mut bodies = vec![
        ("not JSON", "lease held by w1 until tomorrow".to_owned()),
        ("an empty body", String::new()),
        ("a JSON array", "[1, 2]".to_owned()),
    ];
    bodies.extend(BAD_FIELDS.iter().map(|(what, k, v)| (*what, record(&[(k, v)]))));
    let large = format!("{{\"pad\": \"{}\"}}", "x".repeat(5_000));
    bodies.push(("a body larger than any record", large));
    bodies
}

/// A read and grants of `name` report `CorruptRecord` at once (never granted, never
/// waited on).
async fn corrupt_on_read_and_grant(store: &S3Store, name: &str, what: &str) {
    corrupt(what, "read", store.read(&LeaseName::new(name).expect("name")).await);
    foreign::assert_grants_corrupt(&LeaseClient::new(store.clone()), name, TTL, what).await;
}

/// An operator overwrites a held lease's object with a body that cannot be a record
/// (each of [`corrupt_bodies`]). The holder's next renewal notices (the loss fires within
/// one renewal interval, as a store error saying the record is corrupt) and never writes
/// over it; the release of the lost lease reports `CorruptRecord` and writes nothing;
/// reads and grants report `CorruptRecord` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_object_overwritten_corrupt_is_corrupt_on_every_path() {
    let (store, bucket) = fresh_store("foreign-corrupt").await;
    let cases = corrupt_bodies();
    let objects: Vec<(String, String)> = cases.iter().map(|_| unique(&store, "corrupt")).collect();
    let names: Vec<String> = objects.iter().map(|(name, _)| name.clone()).collect();
    let keys: Vec<String> = objects.iter().map(|(_, key)| key.clone()).collect();
    let puts: Vec<(String, String)> = keys
        .iter()
        .cloned()
        .zip(cases.iter().map(|(_, body)| body.clone()))
        .collect();
    let whats: Vec<&str> = cases.iter().map(|(what, _)| *what).collect();
    let causes = foreign::assert_corrupted_by_hand(&store, &names, &whats, TTL, put_objects(&bucket, &puts)).await;
    let bodies = bodies_of(&bucket, &keys).await;
    for (((what, body), now), cause) in cases.iter().zip(bodies).zip(&causes) {
        assert_eq!(
            now.as_deref(),
            Some(body.trim_end()),
            "{what}: the operator's object was written over ({cause:?})"
        );
    }
}

/// Objects put whole under the lease prefix that cannot be records (each of
/// [`corrupt_bodies`]), before any grant: never granted, never waited on, `CorruptRecord`
/// on read and on every grant. The valid record they are made from is granted after its
/// TTL, and so is one whose wall-clock expiry lies at the end of `u64` (expiry is judged
/// by observation, so it is not waited on: the next token is granted after the TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_put_corrupt_is_never_granted() {
    let (store, bucket) = fresh_store("foreign-put").await;
    let cases = corrupt_bodies();
    let names: Vec<(String, String)> = cases.iter().map(|_| unique(&store, "put")).collect();
    let (valid, valid_key) = unique(&store, "put-valid");
    let (far, far_key) = unique(&store, "put-far");
    let mut objects: Vec<(String, String)> = names
        .iter()
        .zip(&cases)
        .map(|((_, key), (_, body))| (key.clone(), body.clone()))
        .collect();
    objects.push((valid_key, record(&[])));
    objects.push((far_key, record(&[("wall_exp_ms", "18446744073709551615")])));
    put_objects(&bucket, &objects).await;
    for ((what, _), (name, _)) in cases.iter().zip(&names) {
        corrupt_on_read_and_grant(&store, name, what).await;
    }
    // A new client, which waits out the record there (its TTL plus the margin, by
    // observation).
    let client = LeaseClient::new(store.clone());
    for name in [valid, far] {
        foreign::assert_next_token(&client, &name, TTL, 8, "not taken over after its TTL").await;
    }
}

/// The shared cases of `leasehold_testkit::edits`, edited by rewriting the record's JSON
/// with boto3 (each put moves the ETag: a release on the old one is refused anyway).
async fn editor() -> leasehold_testkit::edits::Editor {
    let (store, bucket) = fresh_store("edits").await;
    let keys = store.clone();
    leasehold_testkit::edits::Editor::new(store, move |name, field, value| {
        let key = keys.key_for(&LeaseName::new(&name).expect("name"));
        let patch = field.pick(
            format!(r#"{{"holder": "{value}"}}"#),
            format!(r#"{{"token": {value}}}"#),
        );
        let bucket = bucket.clone();
        async move { edit_object(&bucket, &key, &patch).await }
    })
}

leasehold_testkit::editor_cases!(editor(); all);
