//! Connections over Unix sockets or TCP with AutoMTLS: gRPC channels that dial through our own
//! rustls client (tonic's TLS options cannot pin a go-plugin certificate), and listeners whose
//! accepted connections are TLS-terminated before tonic sees them.

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixListener, UnixStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tonic::transport::Uri;

use super::handshake::Addr;
use super::tls::server_name;

/// A Unix or TCP stream.
pub enum Io {
    /// Unix socket.
    Unix(UnixStream),
    /// TCP.
    Tcp(TcpStream),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Unix(s) => Pin::new(s).poll_flush(cx),
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

async fn dial(addr: &Addr) -> io::Result<Io> {
    Ok(match addr {
        Addr::Unix(p) => Io::Unix(UnixStream::connect(p).await?),
        Addr::Tcp(a) => Io::Tcp(TcpStream::connect(a).await?),
    })
}

/// TLS-terminated connections accepted on `listener`, for `serve_with_incoming`. A failed
/// handshake (a wrong certificate) drops that connection only.
pub fn tls_incoming(
    listener: UnixListener,
    tls: Arc<rustls::ServerConfig>,
) -> tokio_stream::wrappers::ReceiverStream<io::Result<tokio_rustls::server::TlsStream<UnixStream>>>
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let acceptor = TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = tx.closed() => return,
            };
            let Ok((stream, _)) = accepted else { return };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match acceptor.accept(stream).await {
                    Ok(s) => {
                        let _ = tx.send(Ok(s)).await;
                    }
                    Err(e) => tracing::warn!(error = %e, "refused a plugin connection (TLS)"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// A gRPC transport over one HTTP/2 connection, without tonic's buffer task: a plugin process is
/// one connection for its whole life (if it breaks, the process is restarted anyway).
#[derive(Clone)]
pub struct H2 {
    send: hyper::client::conn::http2::SendRequest<tonic::body::Body>,
    connection: tokio::task::AbortHandle,
    /// The socket itself (a second descriptor of it): hyper drives the connection in tasks of
    /// its own, which aborting ours does not stop, so closing shuts the socket down.
    socket: Arc<std::os::fd::OwnedFd>,
}

impl H2 {
    /// Closes the connection now, whoever still holds a client on it: after Shutdown, as
    /// go-plugin's host does, so a plugin's graceful stop is not left waiting for it.
    pub fn close(&self) {
        self.connection.abort();
        // Shutting a socket down reaches it through any descriptor of it; an error means it
        // is closed already.
        let _ = rustix::net::shutdown(&*self.socket, rustix::net::Shutdown::Both);
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<hyper::body::Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.send.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.send.send_request(req))
    }
}

/// One HTTP/2 connection to `addr` over mutual TLS; `at` hears which phase it is in (the
/// caller bounds the whole by the plugin's start_timeout).
pub async fn h2(
    addr: Addr,
    tls: Arc<rustls::ClientConfig>,
    at: &(dyn Fn(&'static str) + Sync),
) -> io::Result<H2> {
    at("dialing its socket");
    let io = tokio::time::timeout(Duration::from_secs(10), dial(&addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
    let socket = Arc::new(match &io {
        Io::Unix(s) => s.as_fd().try_clone_to_owned()?,
        Io::Tcp(s) => s.as_fd().try_clone_to_owned()?,
    });
    at("the TLS handshake");
    let stream = TlsConnector::from(tls).connect(server_name(), io).await?;
    at("the HTTP/2 handshake");
    let (send, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
    let connection = tokio::spawn(connection).abort_handle();
    Ok(H2 {
        send,
        connection,
        socket,
    })
}

/// The origin gRPC clients put in their requests (HTTP/2 needs one; the plugin ignores it).
pub fn origin() -> Uri {
    Uri::from_static("http://localhost")
}
