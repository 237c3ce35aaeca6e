//! FE and BE node addresses as the spec writes them (`host:port`): the one grammar the runner,
//! the client and the operator's access rules read them with (pure).

/// `host:port` → `host` (also `[v6]:port` → `v6`, and a leading `http://` or `https://` is
/// dropped); a node without a port is all host. Used for the FE's other ports (MySQL, Flight SQL),
/// which share the host of the HTTP address the spec names.
pub fn host_of(node: &str) -> &str {
    let node = node
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match node.rsplit_once(':') {
        Some((host, _)) => host,
        None => node,
    }
}

/// `host:port` → `port` (also `[v6]:port`, with or without a leading scheme); `None` for a node
/// without a port (or a bare IPv6 address).
pub fn port_of(node: &str) -> Option<u16> {
    let node = node
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let port = match node.strip_prefix('[') {
        Some(rest) => rest.split_once("]:")?.1,
        None if node.matches(':').count() == 1 => node.rsplit_once(':')?.1,
        None => return None,
    };
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_every_spelling_of_a_node() {
        assert_eq!(host_of("fe-0.doris:8030"), "fe-0.doris");
        assert_eq!(host_of("http://10.0.0.1:8030"), "10.0.0.1");
        assert_eq!(host_of("[::1]:8030"), "::1");
        assert_eq!(host_of("[fd00::7]"), "fd00::7");
        assert_eq!(host_of("fe"), "fe");
    }

    #[test]
    fn the_port_of_every_spelling_of_a_node() {
        assert_eq!(port_of("fe-0.doris:8030"), Some(8030));
        assert_eq!(port_of("https://10.0.0.1:8030"), Some(8030));
        assert_eq!(port_of("[::1]:8030"), Some(8030));
        assert_eq!(port_of("[fd00::7]"), None);
        assert_eq!(port_of("fd00::7"), None);
        assert_eq!(port_of("fe"), None);
        assert_eq!(port_of("fe:http"), None);
    }
}
