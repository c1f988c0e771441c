// Package upstreamgo decodes a dra-autoscaler provider's externalgrpc answers the way
// cluster-autoscaler does: with grpc-go, with the message schema of upstream's
// externalgrpc.proto (../upstream/externalgrpc.proto), and with k8s.io/api's protobuf
// Unmarshal for the Kubernetes objects inside them.
//
// It is driven by the Rust test cloudproviders/proto/tests/upstream_client.rs, which serves a
// provider on loopback and runs `go test` here with EXTERNALGRPC_ADDR (the server),
// EXTERNALGRPC_DESCRIPTORS (a FileDescriptorSet of the upstream proto and our extensions.proto,
// compiled by protox) and EXTERNALGRPC_SLICES (the ResourceSlices the provider serves for group
// "gpu"). Run directly without them, every test skips.
package upstreamgo
