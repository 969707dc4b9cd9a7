#!/usr/bin/env bash
# What each part of the library's DynamoDB UpdateItem costs moto (docs/PERFORMANCE.md,
# section 1, DynamoDB): the same renewal-shaped UpdateItem (SET ttl, version, wall-clock
# expiry on one item) timed with boto3, its condition and ReturnValues varied, the
# variants interleaved request by request.
#
#   scripts/dynamo-request-cost.sh [ROUNDS]      (default: 400 requests per variant)
#
# Variants:
#   bare       condition `version = :expect`, nothing returned (what a floor sends)
#   renewal    the library's renewal condition (crates/store-dynamo/src/item.rs), nothing returned
#   renewal+   the same, ReturnValues ALL_NEW: what the library sends
#   full+      a grant's condition (type and range of every attribute), ALL_NEW
#
# The expressions are copied from item.rs; if they change there, change them here.
# Prints p50 and p90 per variant; needs the moto of scripts/stores.sh and its venv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-400}
scripts/stores.sh start moto >/dev/null
eval "$(scripts/stores.sh env)"
VENV="${LEASEHOLD_VENV:-$HOME/.cache/leasehold-venv}"
"$VENV/bin/python" - "$LEASEHOLD_MOTO_ENDPOINT" "$ROUNDS" <<'EOF'
import re, sys, time, uuid
import boto3

endpoint, rounds = sys.argv[1], int(sys.argv[2])
c = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="x", aws_secret_access_key="x")
table = "leasehold-request-cost-" + uuid.uuid4().hex[:8]
c.create_table(TableName=table, KeySchema=[{"AttributeName": "lease", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "lease", "AttributeType": "S"}],
               BillingMode="PAY_PER_REQUEST")
N = lambda v: {"N": str(v)}
names = {"#h": "holder", "#f": "fence", "#t": "ttl_ms", "#w": "wall_expires_at_ms",
         "#v": "version", "#fmt": "format"}
rest = ("#fmt = :fmt AND attribute_type(#t, :N) AND #t BETWEEN :tmin AND :tmax "
        "AND (attribute_not_exists(#w) OR (attribute_type(#w, :N) AND #w BETWEEN :zero AND :wmax))")
renewal = "#v = :expect AND #f = :f AND #h = :h AND " + rest
full = ("#v = :expect AND attribute_type(#f, :N) AND #f BETWEEN :one AND :f "
        "AND (attribute_not_exists(#h) OR (attribute_type(#h, :S) AND size(#h) BETWEEN :one AND :hmax)) AND " + rest)
variants = {
    "bare": ("#v = :expect", None),
    "renewal": (renewal, None),
    "renewal+": (renewal, "ALL_NEW"),
    "full+": (full, "ALL_NEW"),
}
version = uuid.uuid4().hex
c.put_item(TableName=table, Item={"lease": {"S": "a"}, "holder": {"S": "w1"}, "fence": N(7),
                                  "ttl_ms": N(1500), "wall_expires_at_ms": N(1700000000000),
                                  "version": {"S": version}, "format": N(1)})

def send(condition, returns):
    global version
    new = uuid.uuid4().hex
    values = {":t": N(1500), ":v": {"S": new}, ":w": N(1700000000000), ":expect": {"S": version}}
    used = lambda k: re.search(re.escape(k) + r"\b", condition) is not None
    extra = {":f": N(7), ":h": {"S": "w1"}, ":fmt": N(1), ":tmin": N(1), ":tmax": N(86_400_000),
             ":N": {"S": "N"}, ":zero": N(0), ":wmax": N(2**64 - 1), ":one": N(1), ":hmax": N(128),
             ":S": {"S": "S"}}
    values.update({k: v for k, v in extra.items() if used(k)})
    kw = dict(TableName=table, Key={"lease": {"S": "a"}}, UpdateExpression="SET #t = :t, #v = :v, #w = :w",
              ConditionExpression=condition, ExpressionAttributeValues=values,
              ExpressionAttributeNames={k: v for k, v in names.items() if k in condition or k in ("#t", "#v", "#w")},
              ReturnValuesOnConditionCheckFailure="ALL_OLD")
    if returns:
        kw["ReturnValues"] = returns
    start = time.perf_counter()
    c.update_item(**kw)
    took = time.perf_counter() - start
    version = new
    return took

times = {k: [] for k in variants}
order = list(variants)
for i in range(rounds):
    for k in order[i % len(order):] + order[:i % len(order)]:
        times[k].append(send(*variants[k]))
c.delete_table(TableName=table)
for k, v in times.items():
    v.sort()
    print(f"{k:9} p50 {v[len(v) // 2] * 1e6:7.0f} us   p90 {v[int(len(v) * 0.9)] * 1e6:7.0f} us   ({len(v)} requests)")
EOF
