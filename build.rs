//! Compiles the Sparkplug B payload definition, `proto/sparkplug_b.proto` (Eclipse Tahu,
//! EPL-2.0), into Rust types with prost. The compiler is protox, pure Rust: no `protoc` and no C
//! toolchain, so native and ARM cross builds need nothing beyond cargo.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/sparkplug_b.proto");
    let descriptors = protox::compile(["sparkplug_b.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
