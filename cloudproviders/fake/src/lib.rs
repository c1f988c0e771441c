//! dra-provider-fake
