//! The client both AWS stores offer for a local endpoint.

/// Builds a client of the AWS SDK crate `$sdk` (`aws_sdk_s3`, `aws_sdk_dynamodb`) for a
/// local endpoint: static dummy credentials, region `us-east-1`, a 2 s connect timeout,
/// [`DEFAULT_REQUEST_TIMEOUT`](crate::DEFAULT_REQUEST_TIMEOUT) per request, and any
/// further builder calls given (`force_path_style(true)`). Nothing is read from the
/// environment or instance metadata. The stores' `local_client` functions are this.
#[macro_export]
macro_rules! local_client {
    ($sdk:ident, $endpoint:expr $(, $setting:ident($($arg:expr),*))* $(,)?) => {{
        use $sdk::config::timeout::TimeoutConfig;
        use $sdk::config::{BehaviorVersion, Credentials, Region};
        let config = $sdk::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("leasehold", "leasehold", None, None, "leasehold-static"))
            .endpoint_url($endpoint)
            $(.$setting($($arg),*))*
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(::std::time::Duration::from_secs(2))
                    .operation_timeout($crate::DEFAULT_REQUEST_TIMEOUT)
                    .operation_attempt_timeout($crate::DEFAULT_REQUEST_TIMEOUT)
                    .build(),
            )
            .build();
        $sdk::Client::from_conf(config)
    }};
}
