//! External plugins: separate binaries spoken to over gRPC with HashiCorp go-plugin's protocol
//! (handshake, AutoMTLS with P-521, health, broker, controller, stdio), so a plugin written in Go
//! with hashicorp/go-plugin works as well as one written with this SDK. Generated protobuf types
//! stay inside this module.

pub mod activation;
pub mod broker;
pub mod calls;
pub mod client;
pub mod conn;
pub mod handshake;
pub mod hclog;
pub mod host;
pub mod kit;
pub mod proto;
pub mod sdk;
pub mod tls;

pub use client::Remote;
pub use host::{ExternalSpec, Host};
pub use sdk::{logger, serve};
