//! Placeholder: the payout demo replaces it.

fn main() {}
