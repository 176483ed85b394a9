//! Lines from a child's pipe (a command's output, a plugin's stderr) with bounded memory: a line
//! longer than [`MAX_LINE`] is cut, and says how much was cut, however long it runs on without a
//! line break. A command's stdout and stderr share one pipe ([`output_pipe`]), so its lines keep
//! the order it wrote them in (two pipes read side by side cannot tell which came first).

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Gives `cmd` one pipe for both stdout and stderr; returns its read end. The caller drops
/// `cmd` right after spawning it: the write ends it holds would keep the pipe open past the
/// child's exit.
pub fn output_pipe(
    cmd: &mut tokio::process::Command,
) -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    let (reader, writer) = std::io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))
}

/// Longest line kept, in bytes.
pub const MAX_LINE: usize = 16 * 1024;

/// Reads lines of at most [`MAX_LINE`] bytes from `reader`.
#[derive(Debug)]
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    /// Lines of `reader`.
    pub fn new(reader: R) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
        }
    }

    /// The next line (without its line break; invalid UTF-8 replaced), `None` at the end.
    pub async fn next(&mut self) -> Option<String> {
        self.buf.clear();
        let mut cut = 0usize;
        loop {
            let chunk = match self.reader.fill_buf().await {
                Ok(c) => c,
                Err(_) => return None,
            };
            if chunk.is_empty() {
                if self.buf.is_empty() && cut == 0 {
                    return None;
                }
                break;
            }
            let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            let room = MAX_LINE.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..take.min(room)]);
            cut += take.saturating_sub(room);
            self.reader.consume(if done { take + 1 } else { take });
            if done {
                break;
            }
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let mut line = String::from_utf8_lossy(&self.buf).into_owned();
        if cut > 0 {
            line.push_str(&format!(" … [cut: {cut} more bytes]"));
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_cut_and_say_so() {
        let mut input = b"short\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 100));
        input.extend(b"\nlast");
        let mut lines = Lines::new(tokio::io::BufReader::with_capacity(64, &input[..]));
        assert_eq!(lines.next().await.as_deref(), Some("short"));
        let long = lines.next().await.unwrap();
        assert!(long.starts_with(&"x".repeat(MAX_LINE)));
        assert!(
            long.ends_with(" … [cut: 100 more bytes]"),
            "{}",
            &long[MAX_LINE..]
        );
        assert_eq!(lines.next().await.as_deref(), Some("last"));
        assert_eq!(lines.next().await, None);
    }
}
