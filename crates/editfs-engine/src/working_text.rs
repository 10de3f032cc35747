//! The working text of one transaction: a file's lines, editable in place.
//!
//! A transaction may apply a hundred blocks to a 10 MiB file, so the lines are
//! kept in chunks (a splice moves at most a chunk, not the whole line table) and
//! each line carries a hash of its content, so looking for a block's first line
//! compares integers. Line terminators are kept byte-exact per line: a CRLF file,
//! a mixed file and a missing final newline all come back out as they went in.
//!
//! Most transactions make one edit, and listing every line of a file costs more
//! than the edit itself. So a chunk starts as a span of the original whose lines
//! are only counted, and lists them (with their hashes) the first time one of
//! them is read or changed. The first search reads such spans as bytes; later
//! searches list them, since from the second search on the hashes pay for
//! themselves. A transaction of several operations lists every line at once.

use std::borrow::Cow;
use std::cell::{Cell, OnceCell};
use std::hash::Hasher;
use std::ops::Range;

use memchr::memmem::{self, Finder};
use rustc_hash::FxHasher;

/// Lines per chunk before a chunk is split in two.
const CHUNK_LINES: usize = 1024;

/// Bytes of the original per chunk at the start (each cut at the next line end).
const SPAN_BYTES: usize = 16 * 1024;

/// Marks a line whose bytes live in `Doc::added` rather than in the original.
const ADDED: usize = 1 << (usize::BITS - 1);

/// Hits of a byte search in one chunk past which it is listed instead (see `Doc::scan`).
const SCAN_HITS: usize = 16;

/// Lines whose terminators `dominant_eol` counts.
const EOL_SAMPLE: usize = 10_000;

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
/// A range in the added buffer carries `ADDED` in both ends, so `end - start` is
/// its length either way, and two ranges are contiguous only in the same buffer.
#[derive(Clone, Copy)]
struct Line {
    start: usize,
    end: usize,
}

impl Line {
    fn len(self) -> usize {
        self.end - self.start
    }
}

struct Chunk {
    /// Number of lines.
    len: usize,
    /// Where the chunk lies in the original while its lines are the original's,
    /// unchanged and in order; `None` once a splice went through it.
    span: Option<Range<usize>>,
    /// The lines, listed on first need; always listed when `span` is `None`.
    table: OnceCell<Table>,
}

struct Table {
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

impl Table {
    fn new(lines: Vec<Line>, hashes: Vec<u64>) -> Table {
        let mut table = Table {
            lines,
            hashes,
            filter: vec![0; (FILTER_BITS / 64) as usize],
        };
        for k in 0..table.hashes.len() {
            table.remember(table.hashes[k]);
        }
        table
    }

    /// The lines of `span`, a run of whole lines of `original` (about `len` of them).
    fn list(original: &[u8], span: Range<usize>, len: usize) -> Table {
        let (mut lines, mut hashes) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let bytes = &original[span.clone()];
        let mut start = span.start;
        let ends = memchr::memchr_iter(b'\n', bytes).map(|i| span.start + i + 1);
        let last = (bytes.last().is_some_and(|&b| b != b'\n')).then_some(span.end);
        for end in ends.chain(last) {
            hashes.push(line_hash(split_eol(&original[start..end]).0));
            lines.push(Line { start, end });
            start = end;
        }
        Table::new(lines, hashes)
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

impl Chunk {
    /// A chunk of no lines, not listed yet.
    fn empty() -> Chunk {
        Chunk {
            len: 0,
            span: Some(0..0),
            table: OnceCell::new(),
        }
    }

    fn listed(table: Table) -> Chunk {
        Chunk {
            len: table.lines.len(),
            span: None,
            table: OnceCell::from(table),
        }
    }

    fn table(&self, original: &[u8]) -> &Table {
        self.table
            .get_or_init(|| Table::list(original, self.span.clone().unwrap_or_default(), self.len))
    }

    fn into_table(self, original: &[u8]) -> Table {
        match self.table.into_inner() {
            Some(table) => table,
            None => Table::list(original, self.span.unwrap_or_default(), self.len),
        }
    }

    /// Bytes of its lines, terminators included.
    fn bytes(&self, original: &[u8]) -> usize {
        match &self.span {
            Some(span) => span.len(),
            None => self.table(original).lines.iter().map(|l| l.len()).sum(),
        }
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
    /// Whether a search already read unlisted chunks as bytes (see the module doc).
    scanned: Cell<bool>,
    /// The chunk `locate` found last: matching reads lines in runs, mostly from one chunk.
    near: Cell<usize>,
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
        Doc::with_spans(original.into(), SPAN_BYTES, false)
    }

    /// A document whose lines are listed now: for a transaction of several
    /// operations, whose second search would list them anyway, after a scan.
    pub fn listed(original: impl Into<Cow<'a, [u8]>>) -> Doc<'a> {
        Doc::with_spans(original.into(), SPAN_BYTES, true)
    }

    /// A document whose chunks start as spans of about `span_bytes` of the original.
    fn with_spans(original: Cow<'a, [u8]>, span_bytes: usize, listed: bool) -> Doc<'a> {
        let mut chunks = Vec::new();
        let mut start = 0;
        while start < original.len() {
            let cut = (start + span_bytes.max(1)).min(original.len());
            let end =
                memchr::memchr(b'\n', &original[cut - 1..]).map_or(original.len(), |k| cut + k);
            chunks.push(match listed {
                true => {
                    let table = Table::list(&original, start..end, (end - start) / 32);
                    Chunk {
                        len: table.lines.len(),
                        span: Some(start..end),
                        table: OnceCell::from(table),
                    }
                }
                false => {
                    let bytes = &original[start..end];
                    Chunk {
                        len: memchr::memchr_iter(b'\n', bytes).count()
                            + usize::from(bytes.last() != Some(&b'\n')),
                        span: Some(start..end),
                        table: OnceCell::new(),
                    }
                }
            });
            start = end;
        }
        if chunks.is_empty() {
            chunks.push(Chunk::empty());
        }
        let mut doc = Doc {
            original,
            added: Vec::new(),
            chunks,
            starts: Vec::new(),
            len: 0,
            dirty: Vec::new(),
            keys: OnceCell::new(),
            scanned: Cell::new(false),
            near: Cell::new(0),
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
            n += c.len;
        }
        self.len = n;
    }

    /// Chunk and offset of line `i`; `i == len` maps past the end of the last chunk.
    fn locate(&self, i: usize) -> (usize, usize) {
        let near = self.near.get();
        if let Some(&start) = self.starts.get(near)
            && (start..start + self.chunks[near].len).contains(&i)
        {
            return (near, i - start);
        }
        let c = self.starts.partition_point(|&s| s <= i).saturating_sub(1);
        self.near.set(c);
        (c, i - self.starts[c])
    }

    fn table(&self, c: usize) -> &Table {
        self.chunks[c].table(&self.original)
    }

    /// Chunk `c`'s lines, taken out to be changed (an empty chunk stands in).
    fn take_table(&mut self, c: usize) -> Table {
        std::mem::replace(&mut self.chunks[c], Chunk::empty()).into_table(&self.original)
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
        self.table(c).lines[o]
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

    /// Lines in `range` whose content (terminator excluded) is `content`, in order.
    pub fn lines_equal_to(&self, content: &[u8], range: Range<usize>) -> Vec<usize> {
        let scan = !self.scanned.replace(true);
        let hash = line_hash(content);
        let finder = Finder::new(content);
        let mut found = Vec::new();
        for (c, chunk) in self.chunks.iter().enumerate() {
            let first = self.starts[c];
            let last = first + chunk.len;
            if last <= range.start || first >= range.end {
                continue;
            }
            if let (true, Some(span), None) = (scan, &chunk.span, chunk.table.get())
                && let Some(hits) = self.scan(span, first, chunk.len, &finder, &range)
            {
                found.extend(hits);
                continue;
            }
            let table = chunk.table(&self.original);
            if !table.may_hold(hash) {
                continue;
            }
            let lo = range.start.max(first) - first;
            let hi = range.end.min(last) - first;
            for (o, h) in table.hashes[lo..hi].iter().enumerate() {
                if *h == hash && split_eol(self.bytes_of(table.lines[lo + o])).0 == content {
                    found.push(first + lo + o);
                }
            }
        }
        found
    }

    /// `lines_equal_to` over an unlisted chunk of `len` lines from line `first`:
    /// its bytes searched for the content, lines counted only up to each hit.
    /// `None` when the content is found on so many of its lines that listing
    /// them and comparing hashes costs less.
    fn scan(
        &self,
        span: &Range<usize>,
        first: usize,
        len: usize,
        finder: &Finder<'_>,
        range: &Range<usize>,
    ) -> Option<Vec<usize>> {
        let bytes = &self.original[..span.end];
        let (mut pos, mut line) = (span.start, first);
        let (mut found, mut hits) = (Vec::new(), 0);
        // `pos` is where line `line` starts.
        while pos < bytes.len() && line < range.end {
            let Some(k) = finder.find(&bytes[pos..]) else {
                break;
            };
            hits += 1;
            if hits > SCAN_HITS.max(len / 8) {
                return None;
            }
            let hit = pos + k;
            let start = memchr::memrchr(b'\n', &bytes[pos..hit]).map_or(pos, |j| pos + j + 1);
            line += memchr::memchr_iter(b'\n', &bytes[pos..start]).count();
            let end = memchr::memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |j| hit + j + 1);
            let content = split_eol(&bytes[start..end]).0;
            if start == hit && content.len() == finder.needle().len() && range.contains(&line) {
                found.push(line);
            }
            (pos, line) = (end, line + 1);
        }
        Some(found)
    }

    /// The terminator most lines use, for lines that need one and have no neighbour to copy.
    pub fn dominant_eol(&self) -> Eol {
        let (mut lf, mut crlf) = (0usize, 0usize);
        let mut budget = self.len.min(EOL_SAMPLE);
        for chunk in &self.chunks {
            if budget == 0 {
                break;
            }
            if let (Some(span), None) = (&chunk.span, chunk.table.get())
                && chunk.len <= budget
            {
                // A `\r\n` pair always ends a line: count terminators without listing lines.
                let bytes = &self.original[span.clone()];
                let pairs = memmem::find_iter(bytes, b"\r\n").count();
                crlf += pairs;
                lf += memchr::memchr_iter(b'\n', bytes).count() - pairs;
                budget -= chunk.len;
                continue;
            }
            for &l in chunk.table(&self.original).lines.iter().take(budget) {
                match split_eol(self.bytes_of(l)).1 {
                    Eol::Lf => lf += 1,
                    Eol::CrLf => crlf += 1,
                    Eol::None => {}
                }
            }
            budget -= budget.min(chunk.len);
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
        let mut head = self.take_table(ca);
        let tail: Vec<Chunk> = self.chunks.drain(ca + 1..=cb).collect();
        for t in tail {
            let t = t.into_table(&self.original);
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
        self.chunks[ca] = Chunk::listed(head);
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
            .flat_map(|chunk| chunk.table(&self.original).lines.iter())
            .skip(o)
            .take(range.len())
            .map(|&l| split_eol(self.bytes_of(l)).0)
    }

    /// Appends lines `range`, terminators included, to `out`: runs of lines that
    /// lie together in one buffer go in one copy, an untouched chunk unlisted.
    pub fn write_lines(&self, range: Range<usize>, out: &mut Vec<u8>) {
        let end = range.end.min(self.len);
        let mut at = range.start.min(end);
        let (mut c, mut o) = self.locate(at);
        let mut run = Line { start: 0, end: 0 };
        let mut push = |l: Line, out: &mut Vec<u8>| {
            if l.start == run.end {
                run.end = l.end;
            } else {
                out.extend_from_slice(self.bytes_of(run));
                run = l;
            }
        };
        while at < end {
            let chunk = &self.chunks[c];
            let n = (chunk.len - o).min(end - at);
            match &chunk.span {
                Some(span) if n == chunk.len => push(
                    Line {
                        start: span.start,
                        end: span.end,
                    },
                    out,
                ),
                _ => {
                    for &l in &chunk.table(&self.original).lines[o..o + n] {
                        push(l, out);
                    }
                }
            }
            (at, c, o) = (at + n, c + 1, 0);
        }
        out.extend_from_slice(self.bytes_of(run));
    }

    /// Splits an oversized chunk and drops an empty one, keeping at least one chunk.
    fn rebalance(&mut self, c: usize) {
        if self.chunks[c].len > 2 * CHUNK_LINES {
            let table = self.take_table(c);
            let parts: Vec<Chunk> = table
                .lines
                .chunks(CHUNK_LINES)
                .zip(table.hashes.chunks(CHUNK_LINES))
                .map(|(l, h)| Chunk::listed(Table::new(l.to_vec(), h.to_vec())))
                .collect();
            self.chunks.splice(c..=c, parts);
        } else if self.chunks[c].len == 0 && self.chunks.len() > 1 {
            self.chunks.remove(c);
        }
    }

    /// Byte offset of line `i` in `to_bytes()`; `i == len` gives the total length.
    pub fn byte_offset(&self, i: usize) -> usize {
        let (c, o) = self.locate(i.min(self.len));
        let before: usize = self.chunks[..c]
            .iter()
            .map(|chunk| chunk.bytes(&self.original))
            .sum();
        let within = match o {
            0 => 0,
            o if o == self.chunks[c].len => self.chunks[c].bytes(&self.original),
            o => self.table(c).lines[..o].iter().map(|l| l.len()).sum(),
        };
        before + within
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.byte_offset(self.len));
        self.write_lines(0..self.len, &mut out);
        out
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
        assert_eq!(d.lines_equal_to(b"x", 0..d.len()).len(), xs);
    }

    #[test]
    fn a_line_found_on_most_lines_of_a_chunk_lists_it_instead_of_scanning_on() {
        let text = "}\n".repeat(200) + "x\n";
        let d = Doc::with_spans(Cow::Borrowed(text.as_bytes()), 1 << 20, false);
        assert_eq!(d.lines_equal_to(b"x", 0..d.len()), [200]);
        assert!(d.chunks[0].table.get().is_none(), "one hit is scanned");
        let d = Doc::with_spans(Cow::Borrowed(text.as_bytes()), 1 << 20, false);
        let all: Vec<usize> = (0..200).collect();
        assert_eq!(d.lines_equal_to(b"}", 0..d.len()), all);
        assert!(d.chunks[0].table.get().is_some(), "200 hits are listed");
    }

    /// The lines of `text`, terminators included, split the obvious way.
    fn naive(text: &[u8]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = text
            .split_inclusive(|&b| b == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        out.retain(|l| !l.is_empty());
        out
    }

    fn content(line: &[u8]) -> &[u8] {
        split_eol(line).0
    }

    /// Lines `range` of the naive model whose content is `want`.
    fn naive_equal(model: &[Vec<u8>], want: &[u8], range: Range<usize>) -> Vec<usize> {
        range
            .filter(|&i| model.get(i).is_some_and(|l| content(l) == want))
            .collect()
    }

    fn naive_eol(model: &[Vec<u8>]) -> Eol {
        let ends = model.iter().take(EOL_SAMPLE).map(|l| split_eol(l).1);
        let crlf = ends.clone().filter(|e| *e == Eol::CrLf).count();
        let lf = ends.filter(|e| *e == Eol::Lf).count();
        if crlf > lf { Eol::CrLf } else { Eol::Lf }
    }

    /// Checks every reading of `d` against the naive model of its text.
    fn agrees(d: &Doc, model: &[Vec<u8>], probes: &[Vec<u8>], range: Range<usize>) {
        let flat: Vec<u8> = model.concat();
        assert_eq!(d.len(), model.len());
        assert_eq!(d.dominant_eol(), naive_eol(model));
        for i in 0..=model.len() {
            let before: usize = model[..i].iter().map(Vec::len).sum();
            assert_eq!(d.byte_offset(i), before, "byte offset of line {i}");
        }
        let (a, b) = (range.start.min(model.len()), range.end.min(model.len()));
        let mut part = Vec::new();
        d.write_lines(a..b.max(a), &mut part);
        assert_eq!(part, model[a..b.max(a)].concat());
        for p in probes {
            assert_eq!(
                d.lines_equal_to(p, range.clone()),
                naive_equal(model, p, range.clone()),
                "{p:?}"
            );
        }
        assert_eq!(d.to_bytes(), flat);
        for (i, l) in model.iter().enumerate() {
            assert_eq!(d.line_with_eol(i), &l[..]);
        }
    }

    const BYTES: &[u8] = b"ab\r\n\n\n";

    fn text_of(picks: &[usize]) -> Vec<u8> {
        picks.iter().map(|&k| BYTES[k % BYTES.len()]).collect()
    }

    proptest::proptest! {
        /// Chunks read as unlisted spans (scanned, counted, copied whole) give
        /// what listed lines give, before and after splices.
        #[test]
        fn unlisted_spans_read_as_listed_lines(
            picks in proptest::collection::vec(0usize..6, 0..160),
            span_bytes in 1usize..48,
            range in (0usize..40, 0usize..40),
            splices in proptest::collection::vec((0usize..40, 0usize..4, 0usize..3), 0..4),
        ) {
            let text = text_of(&picks);
            let mut model = naive(&text);
            let mut probes: Vec<Vec<u8>> = model.iter().map(|l| content(l).to_vec()).collect();
            probes.extend([b"".to_vec(), b"a".to_vec(), b"ab\r".to_vec(), b"a\nb".to_vec()]);
            let range = range.0.min(range.1)..range.0.max(range.1);
            // Scanned as bytes (the first search), then listed (every later one).
            let d = Doc::with_spans(Cow::Borrowed(&text), span_bytes, false);
            agrees(&d, &model, &probes, range.clone());
            let listed = Doc::with_spans(Cow::Borrowed(&text), span_bytes, true);
            agrees(&listed, &model, &probes, range.clone());
            let fresh = Doc::with_spans(Cow::Borrowed(&text), span_bytes, false);
            for p in &probes {
                let first = fresh.lines_equal_to(p, range.clone());
                fresh.scanned.set(false);
                assert_eq!(first, naive_equal(&model, p, range.clone()));
            }
            let mut d = Doc::with_spans(Cow::Borrowed(&text), span_bytes, false);
            for (at, len, eol) in splices {
                let at = at.min(model.len());
                let end = (at + len).min(model.len());
                let eol = [Eol::Lf, Eol::CrLf, Eol::None][eol];
                d.splice(at..end, &[NewLine { content: b"ab", eol }]);
                let mut line = b"ab".to_vec();
                line.extend_from_slice(eol.as_bytes());
                model.splice(at..end, [line]);
                agrees(&d, &model, &probes, range.clone());
            }
        }
    }
}
