//! Circles in an import graph: its strongly connected components of more than one module,
//! each given as one loop through it.

use std::collections::{BTreeMap, BTreeSet};

/// Module → the modules it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// One loop through each group of modules that reach each other, in a stable order.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        groups: Vec::new(),
    };
    for module in graph.keys() {
        if !tarjan.index.contains_key(module.as_str()) {
            tarjan.visit(module);
        }
    }
    tarjan
        .groups
        .iter()
        .map(|group| loop_through(graph, group))
        .collect()
}

struct Tarjan<'g> {
    graph: &'g Graph,
    index: BTreeMap<&'g str, usize>,
    low: BTreeMap<&'g str, usize>,
    stack: Vec<&'g str>,
    groups: Vec<BTreeSet<&'g str>>,
}

impl<'g> Tarjan<'g> {
    fn visit(&mut self, module: &'g str) {
        let at = self.index.len();
        self.index.insert(module, at);
        self.low.insert(module, at);
        self.stack.push(module);
        for next in self.graph.get(module).into_iter().flatten() {
            let next = next.as_str();
            if !self.graph.contains_key(next) {
                continue;
            }
            if !self.index.contains_key(next) {
                self.visit(next);
                let low = self.low[module].min(self.low[next]);
                self.low.insert(module, low);
            } else if self.stack.contains(&next) {
                let low = self.low[module].min(self.index[next]);
                self.low.insert(module, low);
            }
        }
        if self.low[module] == at {
            let mut group = BTreeSet::new();
            while let Some(top) = self.stack.pop() {
                group.insert(top);
                if top == module {
                    break;
                }
            }
            if group.len() > 1 {
                self.groups.push(group);
            }
        }
    }
}

/// A shortest loop from the group's first module back to it, staying in the group.
fn loop_through(graph: &Graph, group: &BTreeSet<&str>) -> Vec<String> {
    let start = *group.iter().next().expect("a group has modules");
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next_frontier = Vec::new();
        for module in frontier {
            for next in graph.get(module).into_iter().flatten() {
                let next = next.as_str();
                if next == start {
                    let mut path = vec![module];
                    while let Some(prev) = came_from.get(path[path.len() - 1]) {
                        path.push(prev);
                    }
                    // The walk back ends at `start`, the one module with no predecessor.
                    path.reverse();
                    path.push(start);
                    return path.into_iter().map(str::to_string).collect();
                }
                if group.contains(next) && next != start && !came_from.contains_key(next) {
                    came_from.insert(next, module);
                    next_frontier.push(next);
                }
            }
        }
        frontier = next_frontier;
    }
    group.iter().map(|m| m.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
            g.entry(to.to_string()).or_default();
        }
        g
    }

    #[test]
    fn a_chain_has_no_circle_and_a_loop_is_named_in_order() {
        assert!(circles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
        let found = circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
        assert_eq!(found, vec![vec!["a", "b", "c", "a"]]);
    }

    #[test]
    fn two_separate_loops_are_two_circles() {
        let found = circles(&graph(&[("a", "b"), ("b", "a"), ("x", "y"), ("y", "x")]));
        assert_eq!(found.len(), 2);
    }
}
