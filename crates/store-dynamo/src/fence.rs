//! Fenced writes on the caller's own items (rules 4 and 5 of docs/DESIGN.md).
//!
//! The protected item keeps the highest token that has written it in a number
//! attribute of the caller's choosing (its high-water mark). [`ItemFence`] adds the
//! guard to the caller's own `PutItem` or `UpdateItem`, as part of the same request:
//!
//! ```text
//! ConditionExpression: (<the caller's condition>) AND
//!                      (attribute_not_exists(#leasehold_fence) OR #leasehold_fence <= :leasehold_token)
//! UpdateExpression:    SET #leasehold_fence = :leasehold_token, <the caller's SET> ...
//! ```
//!
//! so the write applies only if the item has never seen a newer token, and it raises the
//! mark to the writer's token. [`FenceMode::Newer`] (`<`, via [`ItemFence::strict`] or
//! [`ItemFence::mode`]) is for items written once per grant. This is the DynamoDB side of
//! the contract of [`leasehold_core::fence`]: [`ItemFence::put`] and [`ItemFence::update`]
//! send the guarded request and return the core's [`FencedOutcome`], `Applied` with the
//! SDK's output, or `ConditionFailed` with the item as it was (`None`: it did not exist)
//! when the guard passed but the caller's own condition did not. A refused fence is
//! [`Error::FenceRejected`] (through [`leasehold_core::fence::rejected`], so it is
//! counted): the writer has lost its lease and must stop.
//!
//! The guard uses the placeholders [`NAME_PLACEHOLDER`] and [`TOKEN_PLACEHOLDER`]; the
//! caller's own expression attribute names and values are kept, and a clash is refused
//! as [`Error::InvalidInput`] rather than silently overwritten.
//!
//! ```
//! use aws_sdk_dynamodb::types::AttributeValue;
//! use leasehold_core::FencingToken;
//! use leasehold_dynamodb::ItemFence;
//! # fn client() -> aws_sdk_dynamodb::Client {
//! #     let conf = aws_sdk_dynamodb::Config::builder()
//! #         .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
//! #         .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
//! #         .build();
//! #     aws_sdk_dynamodb::Client::from_conf(conf)
//! # }
//! let fence = ItemFence::new("last_token", FencingToken::new(7))?;
//! let update = client()
//!     .update_item()
//!     .table_name("accounts")
//!     .key("id", AttributeValue::S("acct-1".into()))
//!     .update_expression("SET #bal = #bal + :amt")
//!     .condition_expression("attribute_exists(#bal)")
//!     .expression_attribute_names("#bal", "balance")
//!     .expression_attribute_values(":amt", AttributeValue::N("10".into()));
//! let guarded = fence.guard_update(update)?;
//! assert_eq!(
//!     guarded.get_update_expression().as_deref(),
//!     Some("SET #leasehold_fence = :leasehold_token, #bal = #bal + :amt")
//! );
//! assert_eq!(
//!     guarded.get_condition_expression().as_deref(),
//!     Some("(attribute_exists(#bal)) AND (attribute_not_exists(#leasehold_fence) OR #leasehold_fence <= :leasehold_token)")
//! );
//! // Send it with `fence.update(update).await` instead to get the outcome typed:
//! // Ok(FencedOutcome::Applied(output)), Ok(FencedOutcome::ConditionFailed(old_item))
//! // or Err(Error::FenceRejected { .. }).
//! # Ok::<(), leasehold_core::Error>(())
//! ```

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::put_item::PutItemOutput;
use aws_sdk_dynamodb::operation::put_item::builders::PutItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemOutput;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use leasehold_core::fence::{FenceMode, FencedOutcome, rejected, rejected_by};
use leasehold_core::{Error, FencingToken, Result};

use crate::error::{Conditional, SentRequests, conditional, on_user_table};
use crate::store::once;

/// The expression attribute name the guard uses for the fence attribute.
pub const NAME_PLACEHOLDER: &str = "#leasehold_fence";
/// The expression attribute value the guard uses for the writer's token.
pub const TOKEN_PLACEHOLDER: &str = ":leasehold_token";

/// The longest attribute name DynamoDB accepts in an expression, in bytes.
const MAX_ATTRIBUTE_NAME_LEN: usize = 65_535;

/// The fence guard for one writer's token on items whose high-water mark is kept in
/// one number attribute. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemFence {
    attribute: String,
    token: FencingToken,
    mode: FenceMode,
}

impl ItemFence {
    /// A guard for writes carrying `token`, with the mark in `attribute`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty or too long attribute name, or token 0
    /// (never issued).
    pub fn new(attribute: impl Into<String>, token: FencingToken) -> Result<Self> {
        let attribute = attribute.into();
        if attribute.is_empty() || attribute.len() > MAX_ATTRIBUTE_NAME_LEN {
            return Err(Error::invalid("fence attribute", "must be 1 to 65535 bytes"));
        }
        Ok(Self {
            attribute,
            token: leasehold_core::fence::issued(token)?,
            mode: FenceMode::NotOlder,
        })
    }

    leasehold_core::fence::fence_mode_setters!(mode);

    /// The fence attribute.
    pub fn attribute(&self) -> &str {
        &self.attribute
    }

    /// The writer's token.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The guard alone, for composing by hand (a `TransactWriteItems` condition
    /// check): uses [`ItemFence::names`] and [`ItemFence::values`].
    pub fn condition(&self) -> String {
        let op = self.mode.operator();
        format!("attribute_not_exists({NAME_PLACEHOLDER}) OR {NAME_PLACEHOLDER} {op} {TOKEN_PLACEHOLDER}")
    }

    /// The expression attribute names the guard needs.
    pub fn names(&self) -> HashMap<String, String> {
        HashMap::from([(NAME_PLACEHOLDER.to_owned(), self.attribute.clone())])
    }

    /// The expression attribute values the guard needs.
    pub fn values(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([(TOKEN_PLACEHOLDER.to_owned(), self.token_value())])
    }

    fn token_value(&self) -> AttributeValue {
        AttributeValue::N(self.token.get().to_string())
    }

    /// The caller's condition combined with the guard.
    fn combined_condition(&self, user: Option<&str>) -> String {
        match user.map(str::trim).filter(|c| !c.is_empty()) {
            Some(c) => format!("({c}) AND ({})", self.condition()),
            None => self.condition(),
        }
    }

    fn merged_names(&self, user: Option<&HashMap<String, String>>) -> Result<HashMap<String, String>> {
        let mut names = user.cloned().unwrap_or_default();
        if names.contains_key(NAME_PLACEHOLDER) {
            return Err(Error::invalid(
                "fenced write",
                format!("expression attribute name {NAME_PLACEHOLDER} is reserved for the fence"),
            ));
        }
        names.insert(NAME_PLACEHOLDER.to_owned(), self.attribute.clone());
        Ok(names)
    }

    fn merged_values(&self, user: Option<&HashMap<String, AttributeValue>>) -> Result<HashMap<String, AttributeValue>> {
        let mut values = user.cloned().unwrap_or_default();
        if values.contains_key(TOKEN_PLACEHOLDER) {
            return Err(Error::invalid(
                "fenced write",
                format!("expression attribute value {TOKEN_PLACEHOLDER} is reserved for the fence"),
            ));
        }
        values.insert(TOKEN_PLACEHOLDER.to_owned(), self.token_value());
        Ok(values)
    }

    /// Adds the guard to the caller's `PutItem`: the condition, the names and values,
    /// the token in the item, and `ReturnValuesOnConditionCheckFailure = ALL_OLD` (to
    /// tell a refused fence from the caller's own failed condition).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if the item already holds another value in the fence
    /// attribute, a placeholder clashes, or the legacy `Expected` parameter is used.
    pub fn guard_put(&self, put: PutItemFluentBuilder) -> Result<PutItemFluentBuilder> {
        if put.get_expected().is_some() || put.get_conditional_operator().is_some() {
            return Err(legacy());
        }
        let mut item = put.get_item().clone().unwrap_or_default();
        match item.get(&self.attribute) {
            Some(v) if *v != self.token_value() => {
                return Err(Error::invalid(
                    "fenced write",
                    format!(
                        "the item sets the fence attribute {:?} to {v:?}, not the token",
                        self.attribute
                    ),
                ));
            }
            _ => {}
        }
        item.insert(self.attribute.clone(), self.token_value());
        let condition = self.combined_condition(put.get_condition_expression().as_deref());
        let names = self.merged_names(put.get_expression_attribute_names().as_ref())?;
        let values = self.merged_values(put.get_expression_attribute_values().as_ref())?;
        Ok(put
            .set_item(Some(item))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld))
    }

    /// Adds the guard to the caller's `UpdateItem`: the condition, the names and
    /// values, `SET <fence> = <token>` in the update expression (in the caller's `SET`
    /// clause, or a new one), and `ReturnValuesOnConditionCheckFailure = ALL_OLD`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if the update expression already writes the fence
    /// attribute, a placeholder clashes, or the legacy `AttributeUpdates` / `Expected`
    /// parameters are used.
    pub fn guard_update(&self, update: UpdateItemFluentBuilder) -> Result<UpdateItemFluentBuilder> {
        if update.get_attribute_updates().is_some()
            || update.get_expected().is_some()
            || update.get_conditional_operator().is_some()
        {
            return Err(legacy());
        }
        let user_names = update.get_expression_attribute_names().clone().unwrap_or_default();
        let expression = update.get_update_expression().clone().unwrap_or_default();
        if writes_attribute(&expression, &user_names, &self.attribute) {
            return Err(Error::invalid(
                "fenced write",
                format!(
                    "the update expression already names the fence attribute {:?}",
                    self.attribute
                ),
            ));
        }
        let expression = add_set_action(&expression, &format!("{NAME_PLACEHOLDER} = {TOKEN_PLACEHOLDER}"));
        let condition = self.combined_condition(update.get_condition_expression().as_deref());
        let names = self.merged_names(Some(&user_names))?;
        let values = self.merged_values(update.get_expression_attribute_values().as_ref())?;
        Ok(update
            .update_expression(expression)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld))
    }

    /// Guards and sends the caller's `PutItem` (one request, no SDK retry).
    ///
    /// [`FencedOutcome::Applied`] with the SDK's output when the write applied (the
    /// item's mark is now the token); [`FencedOutcome::ConditionFailed`] with the item as
    /// it was (`None`: it did not exist) when the guard passed but the caller's own
    /// condition did not, and nothing changed.
    ///
    /// # Errors
    /// [`Error::FenceRejected`] if the item has seen a newer token (or, strict, the
    /// same one); [`Error::Indeterminate`] if the request may have applied;
    /// otherwise as [`ItemFence::guard_put`] and the crate's error mapping.
    pub async fn put(
        &self,
        put: PutItemFluentBuilder,
    ) -> Result<FencedOutcome<PutItemOutput, Option<HashMap<String, AttributeValue>>>> {
        let had_condition = has_condition(put.get_condition_expression().as_deref());
        let table = put.get_table_name().clone().unwrap_or_default();
        let guarded = self.guard_put(put)?;
        let flag = SentRequests::default();
        let sent = once(guarded.customize(), &flag).send().await;
        match conditional("fenced PutItem", &table, flag.was_sent(), sent).map_err(on_user_table)? {
            Conditional::Applied(out) => Ok(FencedOutcome::Applied(out)),
            Conditional::Failed(old) => self.judge(&table, had_condition, old),
        }
    }

    /// Guards and sends the caller's `UpdateItem` (one request, no SDK retry). The
    /// outcome is as for [`ItemFence::put`].
    ///
    /// # Errors
    /// As [`ItemFence::put`].
    pub async fn update(
        &self,
        update: UpdateItemFluentBuilder,
    ) -> Result<FencedOutcome<UpdateItemOutput, Option<HashMap<String, AttributeValue>>>> {
        let had_condition = has_condition(update.get_condition_expression().as_deref());
        let table = update.get_table_name().clone().unwrap_or_default();
        let guarded = self.guard_update(update)?;
        let flag = SentRequests::default();
        let sent = once(guarded.customize(), &flag).send().await;
        match conditional("fenced UpdateItem", &table, flag.was_sent(), sent).map_err(on_user_table)? {
            Conditional::Applied(out) => Ok(FencedOutcome::Applied(out)),
            Conditional::Failed(old) => self.judge(&table, had_condition, old),
        }
    }

    /// Tells a refused fence from the caller's own failed condition, by the item as it
    /// was when the condition was evaluated.
    fn judge<O>(
        &self,
        table: &str,
        had_condition: bool,
        old: Option<HashMap<String, AttributeValue>>,
    ) -> Result<FencedOutcome<O, Option<HashMap<String, AttributeValue>>>> {
        // The item as the condition saw it (`ReturnValuesOnConditionCheckFailure =
        // ALL_OLD`): a missing item or mark is mark 0, which every token passes.
        let invalid = |value: String| Error::FenceMarkInvalid {
            resource: format!("table {table}"),
            reason: format!(
                "its fence attribute {:?} holds {value}, not a whole number",
                self.attribute
            ),
        };
        let mark = match old.as_ref().and_then(|item| item.get(&self.attribute)) {
            None => FencingToken::ZERO,
            Some(AttributeValue::N(n)) => FencingToken::new(n.parse::<u64>().map_err(|_| invalid(n.clone()))?),
            Some(other) => return Err(invalid(format!("{other:?}"))),
        };
        if !self.mode.admits(mark, self.token) {
            return Err(rejected_by(self.token, mark));
        }
        if had_condition {
            Ok(FencedOutcome::ConditionFailed(old))
        } else {
            // The guard was the only condition, and the item returned passes it: an
            // emulator that returned no item.
            Err(rejected(self.token))
        }
    }
}

fn legacy() -> Error {
    Error::invalid(
        "fenced write",
        "the legacy Expected / AttributeUpdates / ConditionalOperator parameters cannot be combined with expressions",
    )
}

fn has_condition(c: Option<&str>) -> bool {
    c.is_some_and(|c| !c.trim().is_empty())
}

/// The words of an expression: attribute names (`#x`), values (`:x`), bare names,
/// keywords and function names; `.`, `[..]`, operators and spaces separate them.
fn words(expression: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in expression.char_indices() {
        let word_char = c.is_alphanumeric() || c == '_' || c == '#' || c == ':';
        match (word_char, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &expression[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &expression[s..]));
    }
    out
}

/// True if `expression` names `attribute` directly or through a placeholder.
fn writes_attribute(expression: &str, names: &HashMap<String, String>, attribute: &str) -> bool {
    words(expression).into_iter().any(|(_, w)| {
        if w.starts_with('#') {
            names.get(w).is_some_and(|a| a == attribute)
        } else {
            w == attribute
        }
    })
}

/// Adds `action` to the expression's `SET` clause (creating one if there is none).
/// Clause keywords are reserved words, so a bare `SET` word is the clause keyword.
fn add_set_action(expression: &str, action: &str) -> String {
    let set = words(expression)
        .into_iter()
        .find(|(_, w)| w.eq_ignore_ascii_case("SET"));
    match set {
        Some((at, w)) => {
            let after = at + w.len();
            format!("{}{} {action},{}", &expression[..at], w, &expression[after..])
        }
        None if expression.trim().is_empty() => format!("SET {action}"),
        None => format!("SET {action} {}", expression.trim_start()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_action_goes_into_the_set_clause() {
        let a = "#f = :t";
        assert_eq!(add_set_action("", a), "SET #f = :t");
        assert_eq!(add_set_action("SET x = :x", a), "SET #f = :t, x = :x");
        assert_eq!(add_set_action("set x = :x", a), "set #f = :t, x = :x");
        assert_eq!(add_set_action("REMOVE y", a), "SET #f = :t REMOVE y");
        assert_eq!(
            add_set_action("ADD n :one SET x = :x REMOVE y", a),
            "ADD n :one SET #f = :t, x = :x REMOVE y"
        );
        assert_eq!(add_set_action("  SET\tx = :x", a), "  SET #f = :t,\tx = :x");
        // `#set` and `:set` are placeholders, `settings` a plain name: not the clause.
        assert_eq!(add_set_action("ADD #set :set", a), "SET #f = :t ADD #set :set");
        assert_eq!(
            add_set_action("REMOVE settings SET x = :x", a),
            "REMOVE settings SET #f = :t, x = :x"
        );
    }

    #[test]
    fn finds_writes_to_the_fence_attribute() {
        let names = HashMap::from([("#a".to_owned(), "last_token".to_owned())]);
        assert!(writes_attribute("SET #a = :x", &names, "last_token"));
        assert!(writes_attribute("SET last_token = :x", &names, "last_token"));
        assert!(!writes_attribute("SET last_token_2 = :x", &names, "last_token"));
        assert!(!writes_attribute("SET #b = :last_token", &names, "last_token"));
    }

    #[test]
    fn guard_text() {
        let f = ItemFence::new("mark", FencingToken::new(3)).expect("fence");
        assert_eq!(
            f.condition(),
            "attribute_not_exists(#leasehold_fence) OR #leasehold_fence <= :leasehold_token"
        );
        assert_eq!(
            f.clone().strict().condition(),
            "attribute_not_exists(#leasehold_fence) OR #leasehold_fence < :leasehold_token"
        );
        assert_eq!(f.combined_condition(None), f.condition());
        assert_eq!(f.combined_condition(Some("  ")), f.condition());
        assert_eq!(
            f.combined_condition(Some("a = :b")),
            format!("(a = :b) AND ({})", f.condition())
        );
        assert!(ItemFence::new("", FencingToken::new(1)).is_err());
        assert!(ItemFence::new("m", FencingToken::ZERO).is_err());
    }

    #[test]
    fn judging_a_failed_condition() {
        let f = ItemFence::new("mark", FencingToken::new(5)).expect("fence");
        let item = |v: AttributeValue| Some(HashMap::from([("mark".to_owned(), v)]));
        let n = |x: &str| AttributeValue::N(x.into());
        // No user condition: always the fence.
        assert!(matches!(
            f.judge::<()>("t", false, None),
            Err(Error::FenceRejected { .. })
        ));
        // With a user condition, the old item decides.
        assert!(matches!(
            f.judge::<()>("t", true, None),
            Ok(FencedOutcome::ConditionFailed(None))
        ));
        assert!(matches!(
            f.judge::<()>("t", true, item(n("5"))),
            Ok(FencedOutcome::ConditionFailed(Some(_)))
        ));
        assert!(matches!(
            f.judge::<()>("t", true, item(n("6"))),
            Err(Error::FenceRejected { mark: Some(m), .. }) if m.get() == 6
        ));
        // No user condition, a stale mark: the refusal says which.
        assert!(matches!(
            f.judge::<()>("t", false, item(n("9"))),
            Err(Error::FenceRejected { mark: Some(m), .. }) if m.get() == 9
        ));
        let strict = f.clone().strict();
        assert!(matches!(
            strict.judge::<()>("t", true, item(n("5"))),
            Err(Error::FenceRejected { .. })
        ));
        for bad in [AttributeValue::S("5".into()), n("7.5"), n("-1")] {
            assert!(
                matches!(
                    f.judge::<()>("t", false, item(bad.clone())),
                    Err(Error::FenceMarkInvalid { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
