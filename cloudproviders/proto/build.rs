//! Compiles the two service definitions with protox (pure Rust, no protoc on the machine).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/externalgrpc.proto", "proto/extensions.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Sorted maps make encoding deterministic, as Go's generated code is for Kubernetes maps.
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
