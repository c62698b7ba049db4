//! The fairness check on the repository's real problems: the CuTe and TIRx prompts of every
//! problem differ only in the DSL section (the brief and the starter), and the shared part
//! names neither DSL.

use mkb_core::prompt::{dsl_part, read_brief, variant_prompt, DSL_SECTION_MARKER};
use mkb_core::{Budget, Dsl, DslRegistry, Registry};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn variant_prompts_differ_only_in_the_dsl_section() {
    let dsls = DslRegistry::load_root(&repo()).expect("the repository's DSLs load");
    let reg =
        Registry::load(&repo().join("problems"), &dsls).expect("the repository's problems load");
    assert!(!reg.problems().is_empty());
    let (cute_d, tirx_d) = (
        dsls.require(Dsl::CUTE).unwrap(),
        dsls.require(Dsl::TIRX).unwrap(),
    );
    let budget = Budget::default();
    for p in reg.problems() {
        let cute = variant_prompt(p, cute_d, &budget).expect("cute prompt");
        let tirx = variant_prompt(p, tirx_d, &budget).expect("tirx prompt");
        assert_eq!(
            cute.common,
            tirx.common,
            "{}: the shared part differs between variants",
            p.id()
        );
        assert_ne!(cute.dsl_section, tirx.dsl_section, "{}", p.id());
        // The rendered prompt is exactly: shared part, then the DSL section.
        for (vp, desc) in [(&cute, cute_d), (&tirx, tirx_d)] {
            let dsl = desc.dsl;
            let rendered = vp.render();
            let cut = rendered
                .find(DSL_SECTION_MARKER)
                .expect("the DSL marker is present");
            assert_eq!(&rendered[..cut], vp.common, "{} {dsl}", p.id());
            let brief = read_brief(desc).unwrap();
            let starter = std::fs::read_to_string(p.starter_path(dsl)).unwrap();
            assert_eq!(
                rendered[cut..].trim_start_matches('\n'),
                dsl_part(p, desc, &brief, &starter),
                "{} {dsl}",
                p.id()
            );
            assert_eq!(
                rendered.matches(DSL_SECTION_MARKER).count(),
                1,
                "{} {dsl}: the marker must appear once",
                p.id()
            );
        }
        for word in ["CuTe", "cutlass", "TIRx", "tirx", "tvm"] {
            assert!(
                !cute.common.contains(word),
                "{}: the shared part mentions {word:?}",
                p.id()
            );
        }
    }
}

#[test]
fn the_check_catches_a_dsl_word_in_a_statement() {
    // The check above must be able to fail: a statement that names a DSL is caught.
    let dsls = DslRegistry::load_root(&repo()).unwrap();
    let reg = Registry::load(&repo().join("problems"), &dsls).unwrap();
    let mut p = reg.problems()[0].clone();
    p.statement.push_str("\nHint: use TIRx vector loads.");
    let common = mkb_core::prompt::common_part(&p, &Budget::default());
    assert!(common.contains("TIRx"));
}
