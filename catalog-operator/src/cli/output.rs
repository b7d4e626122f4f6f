//! Where the offline commands write, and how they end when the reader of
//! their output goes away (`catalog-operator render DIR | head`).

use std::{
    io::{self, BufWriter, ErrorKind, Write},
    process::ExitCode,
};

/// Exit code of a command whose input could not be read, or whose output
/// could not be written.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Writes `error` with its chain of causes to `err` and returns exit code 2.
pub(super) fn bad_input(err: &mut dyn Write, error: &dyn std::error::Error) -> io::Result<ExitCode> {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    writeln!(err, "error: {message}")?;
    Ok(ExitCode::from(EXIT_BAD_INPUT))
}

/// A writer whose reader may stop reading early, as `head` does. The first
/// write that finds the pipe closed ends the output: it and every later write
/// are discarded instead of failing, so the command runs to its own end and
/// exits with the code it would have had. Other write errors pass through.
#[derive(Debug)]
pub struct EndsWhenClosed<W> {
    inner: W,
    closed: bool,
}

impl<W: Write> EndsWhenClosed<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, closed: false }
    }

    /// `Ok(fallback)` once the reader is gone, else `result` as it is.
    fn absorb<T>(&mut self, result: io::Result<T>, fallback: T) -> io::Result<T> {
        match result {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(fallback)
            }
            other => other,
        }
    }
}

impl<W: Write> Write for EndsWhenClosed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let result = self.inner.write(buf);
        self.absorb(result, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let result = self.inner.flush();
        self.absorb(result, ())
    }
}

/// Runs an offline command with standard output (buffered) as `out` and
/// standard error as `err`, and returns its exit code. A closed standard
/// output or standard error ends that stream quietly; any other failure to
/// write is reported on standard error with exit code
/// [`EXIT_BAD_INPUT`](EXIT_BAD_INPUT).
pub fn run(command: impl FnOnce(&mut dyn Write, &mut dyn Write) -> io::Result<ExitCode>) -> ExitCode {
    let mut out = EndsWhenClosed::new(BufWriter::new(io::stdout().lock()));
    let mut err = EndsWhenClosed::new(io::stderr().lock());
    let result = command(&mut out, &mut err).and_then(|code| out.flush().map(|()| code));
    match result {
        Ok(code) => code,
        Err(e) => {
            // Nowhere is left to report a failure to write this.
            let _ = writeln!(err, "error: cannot write the output: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe whose reader reads `capacity` bytes, then goes away.
    struct ClosingPipe {
        read: Vec<u8>,
        capacity: usize,
    }

    impl Write for ClosingPipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.read.len() >= self.capacity {
                return Err(ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.capacity - self.read.len());
            self.read.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writes_after_the_reader_left_are_discarded() {
        let mut out = EndsWhenClosed::new(ClosingPipe {
            read: Vec::new(),
            capacity: 6,
        });
        writeln!(out, "first").expect("the reader reads the first line");
        assert!(!out.closed);
        writeln!(out, "second").expect("a closed pipe is not an error");
        writeln!(out, "third").expect("nor is writing on after it closed");
        out.flush().expect("flushing a closed pipe is not an error");
        assert!(out.closed);
        assert_eq!(out.inner.read, b"first\n");
    }

    #[test]
    fn other_write_errors_pass_through() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(ErrorKind::StorageFull, "disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = EndsWhenClosed::new(Full);
        let e = writeln!(out, "x").expect_err("a full disk is an error");
        assert_eq!(e.kind(), ErrorKind::StorageFull);
        assert!(!out.closed);
    }
}
