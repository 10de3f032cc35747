//! The README's first screen gets a newcomer going: where the binary ends up, how to
//! install it, and one click to each recipe.

use std::collections::HashSet;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

/// The first screen: what a reader sees before scrolling.
fn first_screen(text: &str) -> String {
    text.lines().take(40).collect::<Vec<_>>().join("\n")
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn first_screen_says_how_to_install_and_where_the_binary_goes() {
    let top = first_screen(&readme());
    for needed in [
        "cargo install --path .",
        "~/.cargo/bin/editfs",
        "target/release/editfs",
        "/usr/local/bin",
    ] {
        assert!(top.contains(needed), "first screen lacks {needed:?}");
    }
}

#[test]
fn first_screen_links_to_the_mount_sandbox_fstab_and_systemd_recipes_that_exist() {
    let text = readme();
    let anchors: HashSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(anchor)
        .collect();
    let top = first_screen(&text);
    let links: Vec<&str> = top
        .split("](#")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .collect();
    for wanted in [
        "the-mount",
        "fstab-and-mount8",
        "systemd",
        "sandboxing-an-agent",
    ] {
        assert!(links.contains(&wanted), "no link to #{wanted} in {links:?}");
    }
    for link in links {
        assert!(
            anchors.contains(link),
            "#{link} names no section: {anchors:?}"
        );
    }
}
