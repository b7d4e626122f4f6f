//! Compiles the operator-registry API (`proto/registry.proto`) with protox, a
//! protobuf compiler in Rust, so that building needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/registry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .compile_fds(descriptors)?;
    Ok(())
}
