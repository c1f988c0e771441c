//! dra-fake-apiserver
