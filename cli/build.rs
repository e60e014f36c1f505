//! Generates the gRPC code of `proto/cryptodispatch.proto` for the daemon, the CLI's remote
//! client and the tests, with `protox` (a protobuf compiler in Rust, so no system `protoc` is
//! needed) and `tonic-build`. Only with the `daemon` feature: a library build
//! (`default-features = false`) compiles neither.

fn main() {
    #[cfg(feature = "daemon")]
    generate();
}

#[cfg(feature = "daemon")]
fn generate() {
    println!("cargo:rerun-if-changed=../proto/cryptodispatch.proto");
    let descriptors = match protox::compile(["cryptodispatch.proto"], ["../proto"]) {
        Ok(d) => d,
        Err(e) => panic!("proto/cryptodispatch.proto: {e}"),
    };
    if let Err(e) = tonic_build::configure()
        .build_server(true)
        .build_client(true)
        // Bounded decoding (`src/bin/remote/codec.rs`), as seen from the generated modules.
        .codec_path("super::super::codec::BoundedCodec")
        .compile_fds(descriptors)
    {
        panic!("generating the gRPC code: {e}");
    }
}
