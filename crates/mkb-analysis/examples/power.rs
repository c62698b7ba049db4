//! Power study with the default noise levels (release): problems and runs needed to detect a
//! lift. `cargo run --release -p mkb-analysis --example power -- [lift] [simulations]`
fn main() {
    let mut args = std::env::args().skip(1);
    let lift: f64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(0.2);
    let sims: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(200);
    let cfg = mkb_analysis::PowerConfig {
        lift,
        simulations: sims,
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let r = mkb_analysis::power(&cfg);
    print!("{}", mkb_analysis::render_power(&r));
    eprintln!("{:.0} s", t.elapsed().as_secs_f64());
}
