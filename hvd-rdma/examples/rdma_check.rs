//! Prints what this machine offers hvd-rdma: the libfabric providers (and their fabrics
//! and domains), and the RDMA devices and ports, or why there are none. What
//! `hvdrun --check` shows.
//!
//! ```text
//! cargo run -p hvd-rdma --example rdma_check
//! ```

fn main() {
    match hvd_rdma::providers() {
        Ok(providers) if providers.is_empty() => println!("libfabric providers: none"),
        Ok(providers) => {
            println!("libfabric providers:");
            for provider in providers {
                println!("  {provider}");
            }
        }
        Err(e) => println!("libfabric providers: {e}"),
    }
    match hvd_rdma::devices() {
        Ok(devices) => {
            println!("RDMA devices:");
            for device in devices {
                println!("  {}", device.name);
                for port in device.ports {
                    println!("    {port}");
                }
            }
        }
        Err(e) => println!("RDMA devices: {e}"),
    }
}
