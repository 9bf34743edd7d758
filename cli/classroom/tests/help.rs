//! `attention-lab-classroom`'s help texts, version and missing-subcommand lines are the goldens
//! of `scripts/help_goldens.sh`, as `attention-lab`'s are (cli/tests/help.rs).

#[path = "../../tests/help_goldens/mod.rs"]
mod help_goldens;

#[test]
fn every_help_text_and_bare_command_line_is_its_golden() {
    help_goldens::check(
        "attention-lab-classroom",
        env!("CARGO_BIN_EXE_attention-lab-classroom"),
    );
}
