//! `attention-lab`'s help texts, version and missing-subcommand lines are the goldens of
//! `scripts/help_goldens.sh`: moving a flag between crates must not change a byte of them.

mod help_goldens;

#[test]
fn every_help_text_and_bare_command_line_is_its_golden() {
    help_goldens::check("attention-lab", env!("CARGO_BIN_EXE_attention-lab"));
}
