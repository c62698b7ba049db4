//! Power study with the default noise levels (release): problems and runs needed to detect a
//! lift. `cargo run --release -p mkb-analysis --example power -- [lift] [simulations]`
fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let lift: f64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(0.2);
    let sims: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(200);
    let cfg = mkb_analysis::PowerConfig {
        lift,
        simulations: sims,
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let r = match mkb_analysis::power(&cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    print!("{}", mkb_analysis::render_power(&r));
    eprintln!("{:.0} s", t.elapsed().as_secs_f64());
    std::process::ExitCode::SUCCESS
}
