//! dra-provider
