//! A client for a local DynamoDB endpoint (DynamoDB Local, moto, LocalStack).

/// A client for a local endpoint such as `http://127.0.0.1:8000`: static dummy
/// credentials, region `us-east-1`, a 2 s connect timeout and the store's default
/// request timeout ([`crate::DEFAULT_REQUEST_TIMEOUT`]). Nothing is read from the environment or instance metadata. For AWS
/// itself, build the client from `aws_config` as usual.
///
/// ```
/// let client = leasehold_dynamodb::local_client("http://127.0.0.1:8000");
/// assert_eq!(client.config().region().map(|r| r.as_ref()), Some("us-east-1"));
/// ```
pub fn local_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    leasehold_aws::local_client!(aws_sdk_dynamodb, endpoint)
}
