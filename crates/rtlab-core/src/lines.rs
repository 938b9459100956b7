//! Lines that another program or machine writes (the far agent's stdout, the near side's
//! stdin at the agent, a role process's events), read with a bound: a peer that never sends
//! a newline cannot make rtlab allocate without limit, and a line that is not UTF-8 is read
//! (lossily), not taken for the end of the stream.
//!
//! Contract: [`BoundedLines`] yields each line without its `\n` (and a `\r` before it); a line
//! longer than `max` bytes yields [`Line::TooLong`] with its first `max` bytes and its whole
//! length, the rest of it is skipped (read, not kept); reading ends at end of file or at the
//! first I/O error. Memory: at most `max` bytes plus the reader's buffer.

use std::io::BufRead;

/// One line read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// Longer than the bound: its first `max` bytes and how many bytes it had.
    TooLong {
        head: String,
        bytes: u64,
    },
}

/// The lines of `r`, each at most `max` bytes (see the module's contract).
pub struct BoundedLines<R> {
    r: R,
    max: usize,
    buf: Vec<u8>,
    done: bool,
}

impl<R: BufRead> BoundedLines<R> {
    pub fn new(r: R, max: usize) -> BoundedLines<R> {
        BoundedLines { r, max, buf: Vec::new(), done: false }
    }
}

impl<R: BufRead> Iterator for BoundedLines<R> {
    type Item = Line;

    fn next(&mut self) -> Option<Line> {
        if self.done {
            return None;
        }
        self.buf.clear();
        let mut bytes: u64 = 0;
        loop {
            let avail = match self.r.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.done = true;
                    break;
                }
            };
            if avail.is_empty() {
                self.done = true;
                break;
            }
            let (chunk, found) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (&avail[..i], true),
                None => (avail, false),
            };
            let room = self.max.saturating_sub(self.buf.len());
            self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            bytes += chunk.len() as u64;
            let used = chunk.len() + usize::from(found);
            self.r.consume(used);
            if found {
                return Some(self.finish(bytes));
            }
        }
        // end of input: a last line without its newline
        (bytes > 0).then(|| self.finish(bytes))
    }
}

impl<R> BoundedLines<R> {
    fn finish(&mut self, bytes: u64) -> Line {
        if bytes > self.max as u64 {
            return Line::TooLong { head: String::from_utf8_lossy(&self.buf).into_owned(), bytes };
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Line::Text(String::from_utf8_lossy(&self.buf).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // a small buffer: lines cross many fills
        BoundedLines::new(std::io::BufReader::with_capacity(3, input), max).collect()
    }

    fn t(s: &str) -> Line {
        Line::Text(s.into())
    }

    #[test]
    fn lines_are_split_and_the_last_one_needs_no_newline() {
        assert_eq!(lines(b"ab\ncd\r\n\nlast", 10), [t("ab"), t("cd"), t(""), t("last")]);
        assert_eq!(lines(b"", 10), []);
        assert_eq!(lines(b"\n", 10), [t("")]);
    }

    #[test]
    fn a_line_over_the_bound_is_cut_and_said_and_the_next_one_is_read() {
        let mut input = vec![b'x'; 100_000];
        input.extend_from_slice(b"\nok\n");
        assert_eq!(
            lines(&input, 8),
            [Line::TooLong { head: "xxxxxxxx".into(), bytes: 100_000 }, t("ok")]
        );
        // exactly at the bound is a line
        assert_eq!(lines(b"12345678\n", 8), [t("12345678")]);
    }

    #[test]
    fn invalid_utf8_is_read_not_the_end() {
        assert_eq!(lines(b"a\xffb\nnext\n", 10), [t("a\u{fffd}b"), t("next")]);
    }
}
