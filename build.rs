//! Compiles the plugin protocol with protox (pure Rust: no `protoc` needed) and tonic.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/manent/plugin/v1/deployer.proto",
        "proto/plugin/grpc_broker.proto",
        "proto/plugin/grpc_controller.proto",
        "proto/plugin/grpc_stdio.proto",
    ];
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    Ok(())
}
