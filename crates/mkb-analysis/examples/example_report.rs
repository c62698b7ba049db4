//! Write the example report (simulated run, fixed seed) to the path given:
//! `cargo run --release -p mkb-analysis --example example_report -- docs/example-report.html`

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "example-report.html".into());
    let seed = mkb_analysis::report::EXAMPLE_SEED;
    let cmd = format!("cargo run --release -p mkb-analysis --example example_report -- {path}");
    let a = mkb_analysis::report::write_example_report(std::path::Path::new(&path), seed, &cmd)?;
    print!("{}", mkb_analysis::render_tables(&a));
    eprintln!("wrote {path}");
    Ok(())
}
