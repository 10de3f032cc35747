//! A SEARCH that misses on a file of very long lines (minified code, one-line
//! JSON) is diagnosed in bounded time, with a report of bounded size.

use std::time::{Duration, Instant};

use editfs_engine::{Options, Outcome, apply};

/// A bound on growth, not a speed target (the benchmarks measure speed): these
/// inputs take well under a second, a quadratic diagnosis of them takes minutes,
/// so the bound catches a blow-up on any machine, however busy, and never fails
/// a sound build for being slow.
const BUDGET: Duration = Duration::from_secs(10);

fn one_line(len: usize) -> String {
    let unit = "var a=function(b){return b*2+1};";
    let mut s = unit.repeat(len / unit.len() + 1);
    s.truncate(len);
    s.push('\n');
    s
}

/// `line` with every 97th character changed: alike enough to be the closest
/// region, different enough that a character diff is far from linear.
fn scattered_changes(line: &str) -> String {
    line.char_indices()
        .map(|(i, c)| if i % 97 == 96 && c != '\n' { '#' } else { c })
        .collect()
}

/// Applies a one-block payload whose SEARCH is missing; `tolerant: false` keeps
/// the match ladder (whose cost is not the diagnosis's) out of the measure.
fn miss_on(file: &str, search: &str) -> (Duration, editfs_engine::Report) {
    let payload = format!("<<<<<<< SEARCH\n{search}=======\nx\n>>>>>>> REPLACE\n");
    let opts = Options {
        max_payload: 64 << 20,
        tolerant: false,
        ..Options::default()
    };
    let began = Instant::now();
    let edit = apply("min.js", Some(file.as_bytes()), payload.as_bytes(), &opts);
    (began.elapsed(), edit.report)
}

#[test]
fn a_whole_line_miss_on_a_ten_megabyte_line_is_answered_quickly_and_briefly() {
    let file = one_line(10 << 20);
    let search = scattered_changes(&file);
    let (took, report) = miss_on(&file, &search);
    assert_eq!(report.outcome, Outcome::Failed);
    assert!(took < BUDGET, "took {took:?}");
    let text = report.to_string();
    assert!(text.len() < 64 << 10, "report of {} bytes", text.len());
    assert!(text.contains("line 1"), "{text}");
}

#[test]
fn a_miss_on_a_hundred_kilobyte_line_still_names_where_it_parts() {
    let file = one_line(100 << 10);
    let mut search = file.clone();
    search.replace_range(50_000..50_001, "#");
    let (took, report) = miss_on(&file, &search);
    assert!(took < BUDGET, "took {took:?}");
    let text = report.to_string();
    assert!(
        text.contains("column 50001"),
        "{}",
        &text[..text.len().min(4000)]
    );
}

#[test]
fn a_miss_among_many_near_copies_of_search_is_answered_quickly() {
    // Every line of the file equals every SEARCH line but the last: each line
    // starts a window that agrees for 20 lines, at every tier of the ladder.
    let file = "}\n".repeat(1 << 19);
    let search = format!("{}y\n", "}\n".repeat(20));
    let payload = format!("<<<<<<< SEARCH\n{search}=======\nz\n>>>>>>> REPLACE\n");
    let began = Instant::now();
    let edit = apply(
        "f.rs",
        Some(file.as_bytes()),
        payload.as_bytes(),
        &Options::default(),
    );
    let took = began.elapsed();
    assert_eq!(edit.report.outcome, Outcome::Failed);
    assert!(took < BUDGET, "took {took:?}");
}

/// Every operation of a payload may not read the whole file again for a rule
/// that rarely applies: 1,500 blocks (a payload at its default size limit) on a
/// 10 MiB file, each REPLACE holding an HTML entity the file also holds (so the
/// entity rule looks at the file) and no indented line. Read once per block,
/// the file was read 3,000 times: over half a minute here.
#[test]
fn many_blocks_on_a_large_file_never_read_it_whole_per_block() {
    let blocks = 1_500;
    let mut file: String = (0..blocks).map(|i| format!("v{i} = a < b\n")).collect();
    file.push_str(&"x = 1\n".repeat((10 << 20) / 6));
    file.push_str("# &amp;\n");
    let payload: String = (0..blocks)
        .map(|i| {
            format!("<<<<<<< SEARCH\nv{i} = a < b\n=======\nv{i} = a &lt; c\n>>>>>>> REPLACE\n")
        })
        .collect();
    let opts = Options {
        max_payload: 1 << 20,
        ..Options::default()
    };
    let began = Instant::now();
    let edit = apply("e.py", Some(file.as_bytes()), payload.as_bytes(), &opts);
    let took = began.elapsed();
    assert_eq!(edit.report.outcome, Outcome::Ok, "{:?}", edit.report.error);
    assert!(took < BUDGET, "took {took:?}");
}

/// The same for the commonest edit: 3,000 blocks each adding an indented line
/// to a 10 MiB file indented with spaces, where the mixed-indentation warning
/// asks whether the file has tab-indented lines. Asked of the whole file per
/// block, 1,200 such blocks (95 KiB) took 12 s.
#[test]
fn many_blocks_adding_indented_lines_never_read_the_file_whole_per_block() {
    let blocks = 3_000;
    let mut file: String = (0..blocks)
        .map(|i| format!("def f{i}():\n    return {i}\n"))
        .collect();
    file.push_str(&"x = 1\n".repeat((10 << 20) / 6));
    let payload: String = (0..blocks)
        .map(|i| {
            format!("<<<<<<< SEARCH\n    return {i}\n=======\n    y = {i}\n    return y\n>>>>>>> REPLACE\n")
        })
        .collect();
    let began = Instant::now();
    let opts = Options {
        max_payload: 1 << 20,
        ..Options::default()
    };
    let edit = apply("s.py", Some(file.as_bytes()), payload.as_bytes(), &opts);
    let took = began.elapsed();
    assert_eq!(edit.report.outcome, Outcome::Ok, "{:?}", edit.report.error);
    assert!(took < BUDGET, "took {took:?}");
}
