//! The working text of one transaction: a file's lines, editable in place.
//!
//! A transaction may apply a hundred blocks to a 10 MiB file, so the lines are
//! kept in chunks (a splice moves at most a chunk, not the whole line table) and
//! each line carries a hash of its content, so looking for a block's first line
//! compares integers. Line terminators are kept byte-exact per line: a CRLF file,
//! a mixed file and a missing final newline all come back out as they went in.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::hash::Hasher;
use std::ops::Range;

use rustc_hash::FxHasher;

/// Lines per chunk before a chunk is split in two.
const CHUNK_LINES: usize = 1024;

/// Marks a line whose bytes live in `Doc::added` rather than in the original.
const ADDED: usize = 1 << (usize::BITS - 1);

/// How a line ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eol {
    /// The last line of a file without a final newline.
    None,
    Lf,
    CrLf,
}

impl Eol {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Eol::None => b"",
            Eol::Lf => b"\n",
            Eol::CrLf => b"\r\n",
        }
    }
}

/// One line: a byte range (terminator included) in the original or the added buffer.
#[derive(Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

struct Chunk {
    lines: Vec<Line>,
    hashes: Vec<u64>,
    /// A Bloom filter of `hashes` (two bits per line), so a search skips most chunks
    /// without reading their hashes. Bits are only ever added: a line spliced out
    /// leaves a false positive, never a false negative.
    filter: Vec<u64>,
}

/// Bits in a chunk's filter: 8 per line at full size, about 5% false positives.
const FILTER_BITS: u64 = 8192;

fn filter_bits(hash: u64) -> [u64; 2] {
    [hash >> 51, (hash >> 38) % FILTER_BITS]
}

impl Chunk {
    fn new(lines: Vec<Line>, hashes: Vec<u64>) -> Chunk {
        let mut chunk = Chunk {
            lines,
            hashes,
            filter: vec![0; (FILTER_BITS / 64) as usize],
        };
        for h in chunk.hashes.clone() {
            chunk.remember(h);
        }
        chunk
    }

    fn remember(&mut self, hash: u64) {
        for bit in filter_bits(hash) {
            self.filter[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    fn may_hold(&self, hash: u64) -> bool {
        filter_bits(hash)
            .iter()
            .all(|&bit| self.filter[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }
}

/// A line to insert: its content without terminator, and the terminator to give it.
pub struct NewLine<'a> {
    pub content: &'a [u8],
    pub eol: Eol,
}

pub struct Doc<'a> {
    original: Cow<'a, [u8]>,
    added: Vec<u8>,
    chunks: Vec<Chunk>,
    /// Index of each chunk's first line; rebuilt after every splice.
    starts: Vec<usize>,
    len: usize,
    /// Where the lines differ from the original, so a report diffs only those.
    dirty: Vec<Dirty>,
    /// A second hash per line, made on demand and dropped on every change (see `keys`).
    keys: OnceCell<Vec<u64>>,
}

/// A run of changed lines: `new_len` lines from `start` (in the current text)
/// stand where `old_len` lines of the original stood. Lines outside every run
/// are the original's, byte for byte, and in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub start: usize,
    pub new_len: usize,
    pub old_len: usize,
}

/// Hash of a line's content, terminator excluded, so CRLF and LF lines agree.
pub fn line_hash(content: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(content);
    h.finish()
}

/// Splits a line's bytes into content and terminator.
fn split_eol(bytes: &[u8]) -> (&[u8], Eol) {
    match bytes {
        [rest @ .., b'\r', b'\n'] => (rest, Eol::CrLf),
        [rest @ .., b'\n'] => (rest, Eol::Lf),
        _ => (bytes, Eol::None),
    }
}

impl<'a> Doc<'a> {
    pub fn new(original: impl Into<Cow<'a, [u8]>>) -> Doc<'a> {
        let original = original.into();
        let mut chunks = Vec::new();
        let (mut lines, mut hashes) = (
            Vec::with_capacity(CHUNK_LINES),
            Vec::with_capacity(CHUNK_LINES),
        );
        let mut start = 0;
        let ends = memchr::memchr_iter(b'\n', &original).map(|i| i + 1);
        let last =
            (!original.is_empty() && original.last() != Some(&b'\n')).then_some(original.len());
        for end in ends.chain(last) {
            hashes.push(line_hash(split_eol(&original[start..end]).0));
            lines.push(Line { start, end });
            start = end;
            if lines.len() == CHUNK_LINES {
                chunks.push(Chunk::new(
                    std::mem::take(&mut lines),
                    std::mem::take(&mut hashes),
                ));
            }
        }
        if !lines.is_empty() || chunks.is_empty() {
            chunks.push(Chunk::new(lines, hashes));
        }
        let mut doc = Doc {
            original,
            added: Vec::new(),
            chunks,
            starts: Vec::new(),
            len: 0,
            dirty: Vec::new(),
            keys: OnceCell::new(),
        };
        doc.reindex();
        doc
    }

    /// Number of lines; a file that ends with a newline has no empty last line.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn reindex(&mut self) {
        self.starts.clear();
        let mut n = 0;
        for c in &self.chunks {
            self.starts.push(n);
            n += c.lines.len();
        }
        self.len = n;
    }

    /// Chunk and offset of line `i`; `i == len` maps past the end of the last chunk.
    fn locate(&self, i: usize) -> (usize, usize) {
        let c = self.starts.partition_point(|&s| s <= i).saturating_sub(1);
        (c, i - self.starts[c])
    }

    fn bytes_of(&self, line: Line) -> &[u8] {
        if line.start & ADDED != 0 {
            &self.added[line.start & !ADDED..line.end & !ADDED]
        } else {
            &self.original[line.start..line.end]
        }
    }

    fn raw(&self, i: usize) -> Line {
        let (c, o) = self.locate(i);
        self.chunks[c].lines[o]
    }

    /// Line `i` (0-based) without its terminator.
    pub fn line(&self, i: usize) -> &[u8] {
        split_eol(self.bytes_of(self.raw(i))).0
    }

    pub fn eol(&self, i: usize) -> Eol {
        split_eol(self.bytes_of(self.raw(i))).1
    }

    /// Line `i` with its terminator.
    pub fn line_with_eol(&self, i: usize) -> &[u8] {
        self.bytes_of(self.raw(i))
    }

    /// Lines in `range` whose content hashes to `hash`, in order.
    pub fn lines_with_hash(&self, hash: u64, range: Range<usize>) -> Vec<usize> {
        let mut found = Vec::new();
        for (c, chunk) in self.chunks.iter().enumerate() {
            let first = self.starts[c];
            let last = first + chunk.lines.len();
            if last <= range.start || first >= range.end || !chunk.may_hold(hash) {
                continue;
            }
            let lo = range.start.max(first) - first;
            let hi = range.end.min(last) - first;
            for (o, h) in chunk.hashes[lo..hi].iter().enumerate() {
                if *h == hash {
                    found.push(first + lo + o);
                }
            }
        }
        found
    }

    /// The terminator most lines use, for lines that need one and have no neighbour to copy.
    pub fn dominant_eol(&self) -> Eol {
        let (mut lf, mut crlf) = (0usize, 0usize);
        for i in 0..self.len.min(10_000) {
            match self.eol(i) {
                Eol::Lf => lf += 1,
                Eol::CrLf => crlf += 1,
                Eol::None => {}
            }
        }
        if crlf > lf { Eol::CrLf } else { Eol::Lf }
    }

    /// Replaces lines `range` with `new`.
    pub fn splice(&mut self, range: Range<usize>, new: &[NewLine<'_>]) {
        let mut lines = Vec::with_capacity(new.len());
        let mut hashes = Vec::with_capacity(new.len());
        for n in new {
            let start = self.added.len();
            self.added.extend_from_slice(n.content);
            self.added.extend_from_slice(n.eol.as_bytes());
            lines.push(Line {
                start: start | ADDED,
                end: self.added.len() | ADDED,
            });
            hashes.push(line_hash(n.content));
        }
        let (ca, oa) = self.locate(range.start);
        let (cb, _) = self.locate(range.end);
        // Fold the chunks the range spans into the first, then splice within it.
        let tail: Vec<Chunk> = self.chunks.drain(ca + 1..=cb).collect();
        let head = &mut self.chunks[ca];
        for t in tail {
            head.lines.extend(t.lines);
            head.hashes.extend(t.hashes);
            for (mine, theirs) in head.filter.iter_mut().zip(&t.filter) {
                *mine |= theirs;
            }
        }
        for &h in &hashes {
            head.remember(h);
        }
        let end = oa + range.len();
        head.lines.splice(oa..end, lines);
        head.hashes.splice(oa..end, hashes);
        self.rebalance(ca);
        self.reindex();
        self.mark_dirty(range, new.len());
        self.keys.take();
    }

    /// `key` of every line's content, computed once per version of the text: the
    /// tolerant tiers and the diagnosis look lines up by a looser key than `line_hash`.
    pub fn keys(&self, key: fn(&[u8]) -> u64) -> &[u64] {
        self.keys
            .get_or_init(|| self.lines_in(0..self.len).map(key).collect())
    }

    /// Folds a splice of `range` into `new` lines into the runs of changed lines.
    fn mark_dirty(&mut self, range: Range<usize>, new: usize) {
        let (a, b) = (range.start, range.end);
        let (mut lo, mut hi, mut sum_new, mut sum_old) = (a, b, 0, 0);
        let mut kept = Vec::with_capacity(self.dirty.len() + 1);
        let mut after = Vec::new();
        for d in self.dirty.drain(..) {
            let end = d.start + d.new_len;
            if end < a {
                kept.push(d);
            } else if d.start > b {
                after.push(Dirty {
                    start: d.start + new - range.len(),
                    ..d
                });
            } else {
                (lo, hi) = (lo.min(d.start), hi.max(end));
                sum_new += d.new_len;
                sum_old += d.old_len;
            }
        }
        let span = hi - lo;
        kept.push(Dirty {
            start: lo,
            new_len: span - range.len() + new,
            old_len: span - sum_new + sum_old,
        });
        kept.extend(after);
        self.dirty = kept;
    }

    /// The runs of changed lines, in order.
    pub fn dirty(&self) -> &[Dirty] {
        &self.dirty
    }

    /// Where line `i` lies in the original, if it is an original line.
    pub fn original_span(&self, i: usize) -> Option<Range<usize>> {
        let l = self.raw(i);
        (l.start & ADDED == 0).then_some(l.start..l.end)
    }

    /// Lines `range` without terminators, in order, without a lookup per line.
    pub fn lines_in(&self, range: Range<usize>) -> impl Iterator<Item = &[u8]> {
        let (c, o) = self.locate(range.start.min(self.len));
        self.chunks[c..]
            .iter()
            .flat_map(|chunk| chunk.lines.iter())
            .skip(o)
            .take(range.len())
            .map(|&l| split_eol(self.bytes_of(l)).0)
    }

    /// Appends lines `range`, terminators included, to `out`.
    pub fn write_lines(&self, range: Range<usize>, out: &mut Vec<u8>) {
        let (c, o) = self.locate(range.start.min(self.len));
        let lines = self.chunks[c..]
            .iter()
            .flat_map(|chunk| chunk.lines.iter())
            .skip(o)
            .take(range.len());
        for &l in lines {
            out.extend_from_slice(self.bytes_of(l));
        }
    }

    /// Splits an oversized chunk and drops an empty one, keeping at least one chunk.
    fn rebalance(&mut self, c: usize) {
        if self.chunks[c].lines.len() > 2 * CHUNK_LINES {
            let chunk = std::mem::replace(&mut self.chunks[c], Chunk::new(Vec::new(), Vec::new()));
            let parts: Vec<Chunk> = chunk
                .lines
                .chunks(CHUNK_LINES)
                .zip(chunk.hashes.chunks(CHUNK_LINES))
                .map(|(l, h)| Chunk::new(l.to_vec(), h.to_vec()))
                .collect();
            self.chunks.splice(c..=c, parts);
        } else if self.chunks[c].lines.is_empty() && self.chunks.len() > 1 {
            self.chunks.remove(c);
        }
    }

    /// Byte offset of line `i` in `to_bytes()`; `i == len` gives the total length.
    pub fn byte_offset(&self, i: usize) -> usize {
        (0..i).map(|k| self.line_with_eol(k).len()).sum()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let total: usize = self.iter_lines().map(<[u8]>::len).sum();
        let mut out = Vec::with_capacity(total);
        self.write_lines(0..self.len, &mut out);
        out
    }

    /// Every line with its terminator, in order.
    pub fn iter_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks
            .iter()
            .flat_map(|c| c.lines.iter().map(|&l| self.bytes_of(l)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(d: &Doc) -> Vec<String> {
        (0..d.len())
            .map(|i| String::from_utf8_lossy(d.line(i)).into_owned())
            .collect()
    }

    #[test]
    fn keeps_terminators_and_missing_final_newline() {
        let d = Doc::new(b"a\r\nb\nc");
        assert_eq!(lines(&d), ["a", "b", "c"]);
        assert_eq!(
            (d.eol(0), d.eol(1), d.eol(2)),
            (Eol::CrLf, Eol::Lf, Eol::None)
        );
        assert_eq!(d.to_bytes(), b"a\r\nb\nc");
    }

    #[test]
    fn dirty_runs_track_what_changed() {
        let text: String = (0..100).map(|i| format!("{i}\n")).collect();
        let mut d = Doc::new(text.as_bytes());
        let one = [NewLine {
            content: b"x",
            eol: Eol::Lf,
        }];
        d.splice(10..12, &one);
        d.splice(50..50, &one);
        d.splice(9..11, &[]);
        let runs = |d: &Doc| {
            d.dirty()
                .iter()
                .map(|r| (r.start, r.new_len, r.old_len))
                .collect::<Vec<_>>()
        };
        assert_eq!(runs(&d), [(9, 0, 3), (48, 1, 0)]);
        let twelve = text.find("\n12\n").unwrap() + 1;
        assert_eq!(d.original_span(9), Some(twelve..twelve + 3));
        assert_eq!(d.original_span(48), None);
    }

    #[test]
    fn empty_file_has_no_lines() {
        assert_eq!(Doc::new(b"").len(), 0);
        assert_eq!(Doc::new(b"\n").len(), 1);
    }

    #[test]
    fn splice_across_chunks_matches_a_flat_splice() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let mut d = Doc::new(text.as_bytes());
        let mut flat: Vec<String> = text.lines().map(str::to_owned).collect();
        let new = [
            NewLine {
                content: b"x",
                eol: Eol::Lf,
            },
            NewLine {
                content: b"y",
                eol: Eol::Lf,
            },
        ];
        for (a, b) in [
            (1000, 3100),
            (0, 1),
            (2000, 2000),
            (10, 12),
            (2900, 2904),
            (500, 2500),
        ] {
            d.splice(a..b, &new);
            flat.splice(a..b, ["x".to_owned(), "y".to_owned()]);
            assert_eq!(lines(&d), flat);
        }
        let xs = flat.iter().filter(|l| *l == "x").count();
        let iterated: Vec<&[u8]> = d.lines_in(300..305).collect();
        let want: Vec<&[u8]> = flat[300..305].iter().map(|l| l.as_bytes()).collect();
        assert_eq!(iterated, want);
        assert_eq!(d.lines_with_hash(line_hash(b"x"), 0..d.len()).len(), xs);
    }
}
