//! Skills: the distillation prompt, parsing the model's SKILL.md answer (name, description,
//! markdown body, a hard length cap), the leak audit (code in the target DSL, a verbatim copy
//! of the source kernel), and the fixed prompt slot a skill is shown in.

use serde::{Deserialize, Serialize};

/// Default hard cap on a skill's length, in characters (docs/design.md).
pub const DEFAULT_MAX_CHARS: usize = 6000;

/// The message that asks the same conversation for a skill, whatever the attempt's outcome.
pub fn distill_prompt(max_chars: usize) -> String {
    format!(
        "The attempt is over. Distill what you learned into a skill for a fresh agent that will solve this \
same problem from scratch in a DIFFERENT kernel DSL, with the same tools and budget. It will see your skill \
and nothing else from this conversation.\n\n\
Write it in SKILL.md form, exactly:\n\
---\n\
name: <short kebab-case name>\n\
description: <one sentence: when this skill helps>\n\
---\n\
<markdown body>\n\n\
In the body, keep what transfers across DSLs: the problem's structure and numbers that matter, the algorithm \
and work decomposition that worked, the hardware facts (H200, sm_90a), what failed and why, correctness traps \
(ragged shapes, precision, tolerances), and how to use the harness well. Be concrete. Do not paste your kernel \
and do not write code in any DSL; short formulas or pseudocode are fine. At most {max_chars} characters in all: \
longer text is cut."
    )
}

/// A parsed skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    /// Format and audit flags: "no_frontmatter", "truncated", "empty",
    /// "target_dsl_code", "source_kernel_copy".
    pub flags: Vec<String>,
}

impl Skill {
    /// The SKILL.md text.
    pub fn to_markdown(&self) -> String {
        format!(
            "---\nname: {}\ndescription: {}\n---\n{}\n",
            self.name,
            self.description,
            self.body.trim_end()
        )
    }

    pub fn chars(&self) -> usize {
        self.to_markdown().chars().count()
    }
}

/// Parse the model's answer into a skill, enforcing the cap. Never fails: a malformed answer
/// is kept as the body with a flag (a skill is kept whatever the attempt's outcome).
pub fn parse_skill(text: &str, max_chars: usize) -> Skill {
    let mut flags = Vec::new();
    let t = strip_fence(text.trim());
    let (name, description, body) = match parse_frontmatter(t) {
        Some(x) => x,
        None => {
            flags.push("no_frontmatter".to_string());
            ("unnamed-skill".to_string(), String::new(), t.to_string())
        }
    };
    if body.trim().is_empty() {
        flags.push("empty".to_string());
    }
    let mut skill = Skill {
        name: one_line(&name, 64),
        description: one_line(&description, 1024),
        body,
        flags,
    };
    let over = skill.chars().saturating_sub(max_chars);
    if over > 0 {
        let keep = skill.body.chars().count().saturating_sub(over + 20);
        skill.body = skill.body.chars().take(keep).collect::<String>() + "\n[truncated]";
        skill.flags.push("truncated".to_string());
    }
    skill
}

fn one_line(s: &str, max: usize) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(max)
        .collect()
}

fn strip_fence(t: &str) -> &str {
    // Models sometimes wrap the whole answer in ```markdown ... ```.
    if let Some(rest) = t.strip_prefix("```") {
        if let Some(nl) = rest.find('\n') {
            let inner = &rest[nl + 1..];
            if let Some(end) = inner.rfind("```") {
                return inner[..end].trim();
            }
        }
    }
    t
}

fn parse_frontmatter(t: &str) -> Option<(String, String, String)> {
    let start = t.find("---")?;
    // Allow a little preamble before the front matter.
    if t[..start].trim().len() > 200 {
        return None;
    }
    let rest = &t[start + 3..];
    let end = rest.find("\n---")?;
    let head = &rest[..end];
    let body = rest[end + 4..]
        .trim_start_matches(['-', '\r'])
        .trim_start_matches('\n')
        .to_string();
    let mut name = None;
    let mut desc = None;
    for line in head.lines() {
        if let Some(v) = line.trim().strip_prefix("name:") {
            name = Some(v.trim().trim_matches('"').to_string());
        } else if let Some(v) = line.trim().strip_prefix("description:") {
            desc = Some(v.trim().trim_matches('"').to_string());
        }
    }
    Some((name?, desc.unwrap_or_default(), body))
}

/// The markers (from the DSLs' descriptors, `skill.leak_markers`) that the text holds.
pub fn dsl_code_markers<'a>(text: &str, markers: &'a [String]) -> Vec<&'a str> {
    markers
        .iter()
        .map(String::as_str)
        .filter(|m| text.contains(m))
        .collect()
}

/// Longest run of consecutive source-kernel lines (normalized, ignoring short or trivial
/// lines) that also appears, in order and consecutively, in the skill.
pub fn longest_copied_run(skill: &str, kernel: &str) -> usize {
    let norm = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|l| l.len() >= 12 && !l.starts_with('#'))
            .collect()
    };
    let k = norm(kernel);
    let s = norm(skill);
    if k.is_empty() || s.is_empty() {
        return 0;
    }
    // Longest common substring over line sequences (dynamic programming, O(|k| |s|)).
    let mut best = 0;
    let mut prev = vec![0usize; s.len() + 1];
    for ki in &k {
        let mut cur = vec![0usize; s.len() + 1];
        for (j, sj) in s.iter().enumerate() {
            if ki == sj {
                cur[j + 1] = prev[j] + 1;
                best = best.max(cur[j + 1]);
            }
        }
        prev = cur;
    }
    best
}

/// Lines in a row that count as a verbatim copy of the source kernel.
pub const COPY_RUN_LINES: usize = 6;

/// The leak audit: flag (never drop) a skill with code in a target DSL (`target_markers`: the
/// leak markers of every DSL the skill may be given to) or a verbatim copy of the source
/// kernel. Returns the flags to add.
pub fn audit(skill: &Skill, target_markers: &[String], source_kernel: Option<&str>) -> Vec<String> {
    let text = skill.to_markdown();
    let mut flags = Vec::new();
    if !dsl_code_markers(&text, target_markers).is_empty() {
        flags.push("target_dsl_code".to_string());
    }
    if let Some(k) = source_kernel {
        if longest_copied_run(&text, k) >= COPY_RUN_LINES {
            flags.push("source_kernel_copy".to_string());
        }
    }
    flags
}

/// The fixed prompt slot of a skill: identical framing for the conditioned and the placebo
/// condition, so that the text around the skill cannot tell them apart.
pub fn skill_slot(skill_markdown: &str) -> String {
    format!(
        "\n# Notes from earlier experience\n\nAn agent wrote the following skill after an earlier kernel-optimization \
attempt. Use it where it helps; it may not all apply.\n\n<skill>\n{}\n</skill>\n",
        skill_markdown.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_frontmatter() {
        let s = parse_skill("---\nname: fast-softmax\ndescription: One pass per row.\n---\n# Body\nkeep rows in registers\n", 6000);
        assert_eq!(s.name, "fast-softmax");
        assert_eq!(s.description, "One pass per row.");
        assert!(s.body.starts_with("# Body"));
        assert!(s.flags.is_empty());
        let fenced = parse_skill(
            "```markdown\n---\nname: x\ndescription: y\n---\nbody\n```",
            6000,
        );
        assert_eq!(fenced.name, "x");
        assert_eq!(fenced.body.trim(), "body");
    }

    #[test]
    fn malformed_is_kept_and_flagged() {
        let s = parse_skill("just some notes", 6000);
        assert_eq!(s.body, "just some notes");
        assert_eq!(s.flags, vec!["no_frontmatter"]);
        let e = parse_skill("", 6000);
        assert!(e.flags.contains(&"empty".to_string()));
    }

    #[test]
    fn enforces_the_cap() {
        let long = format!(
            "---\nname: n\ndescription: d\n---\n{}",
            "word ".repeat(5000)
        );
        let s = parse_skill(&long, 6000);
        assert!(s.chars() <= 6000, "{}", s.chars());
        assert!(s.flags.contains(&"truncated".to_string()));
    }

    /// The leak markers of one DSL of the repository's registry.
    fn markers(dsl: mkb_core::Dsl) -> Vec<String> {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let reg = mkb_core::DslRegistry::load_root(&root).unwrap();
        reg.require(dsl).unwrap().leak_markers().to_vec()
    }

    #[test]
    fn audit_flags_target_code_and_copies() {
        use mkb_core::Dsl;
        let kernel = (0..20)
            .map(|i| format!("    value_{i} = compute_something(x, {i}) * scale"))
            .collect::<Vec<_>>()
            .join("\n");
        let copied = Skill {
            name: "n".into(),
            description: "d".into(),
            body: format!(
                "Here it is:\n{}\n",
                kernel.lines().take(8).collect::<Vec<_>>().join("\n")
            ),
            flags: vec![],
        };
        assert_eq!(
            audit(&copied, &markers(Dsl::TIRX), Some(&kernel)),
            vec!["source_kernel_copy"]
        );
        let short = Skill {
            name: "n".into(),
            description: "d".into(),
            body: kernel.lines().take(3).collect::<Vec<_>>().join("\n"),
            flags: vec![],
        };
        assert!(audit(&short, &markers(Dsl::TIRX), Some(&kernel)).is_empty());
        let tirx_code = Skill {
            name: "n".into(),
            description: "d".into(),
            body: "use @T.function and T.cuda.thread_idx".into(),
            flags: vec![],
        };
        assert_eq!(
            audit(&tirx_code, &markers(Dsl::TIRX), None),
            vec!["target_dsl_code"]
        );
        assert!(audit(&tirx_code, &markers(Dsl::CUTE), None).is_empty());
        // Any DSL's markers: a skill fed to several targets is audited against all of them.
        let toy = vec!["@toy.kernel".to_string()];
        let toy_code = Skill {
            body: "decorate with @toy.kernel".into(),
            ..tirx_code.clone()
        };
        assert_eq!(audit(&toy_code, &toy, None), vec!["target_dsl_code"]);
        let both: Vec<String> = markers(Dsl::CUTE).into_iter().chain(toy).collect();
        assert_eq!(audit(&toy_code, &both, None), vec!["target_dsl_code"]);
        assert!(audit(&toy_code, &markers(Dsl::TIRX), None).is_empty());
    }

    #[test]
    fn slot_is_the_same_frame_for_any_skill() {
        let a = skill_slot("A");
        let b = skill_slot("B");
        assert_eq!(a.replace("A\n</skill>", ""), b.replace("B\n</skill>", ""));
    }
}
