//! Writes the Internet-scale workload (`dra_benches::internet`) as a `kind: List` JSON file,
//! the input of `dra-autoscaler simulate`:
//! `cargo run --release -p dra-benches --example gen_internet -- 100000 /tmp/internet-100k.json`.

use std::io::Write;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let path = args
        .next()
        .unwrap_or_else(|| format!("internet-{nodes}.json"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path)?);
    dra_benches::internet::write_json(nodes, &mut out)?;
    out.flush()?;
    let counts = dra_benches::internet::Counts::of(nodes);
    eprintln!(
        "{path}: {nodes} nodes ({} with GPUs), {} running pods, {} pending ({} singles, {} gangs of {})",
        counts.gpu_nodes,
        nodes,
        counts.pending(),
        counts.singles,
        counts.gangs,
        dra_benches::internet::GANG_SIZE
    );
    Ok(())
}
