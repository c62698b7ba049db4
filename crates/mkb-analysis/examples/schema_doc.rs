//! Print the export schema as the Markdown table kept in docs/analysis.md.
fn main() {
    print!("{}", mkb_analysis::export_schema_markdown());
}
