//! Inception v3 as torchvision defines it (`inception_v3()`: with the auxiliary
//! classifier, which trains along with the rest).

use super::{Layer, LayerList, Shape, Window};

/// Inception v3's input side (torchvision and tf_cnn_benchmarks both train on 299×299).
pub const IMAGE_SIZE: usize = 299;

const ONE: Window = Window::square(1, 1, 0);
const THREE: Window = Window::square(3, 1, 1);
const THREE_STRIDE_TWO: Window = Window::square(3, 2, 0);

/// torchvision's BasicConv2d: a convolution without bias and its batch norm.
fn basic(
    layers: &mut LayerList,
    name: &str,
    input: Shape,
    channels: usize,
    window: Window,
) -> Shape {
    let output = layers.conv(&format!("{name}.conv"), input, channels, window, false);
    layers.batch_norm(&format!("{name}.bn"), channels);
    output
}

/// Builds the branches of one inception block under `block.`.
struct Block<'a> {
    layers: &'a mut LayerList,
    block: &'a str,
    input: Shape,
}

impl Block<'_> {
    /// A chain of BasicConv2d starting from the block's input.
    fn chain(&mut self, convs: &[(&str, usize, Window)]) -> Shape {
        self.chain_from(self.input, convs)
    }

    /// A chain of BasicConv2d starting from `from`, inside the block.
    fn chain_from(&mut self, from: Shape, convs: &[(&str, usize, Window)]) -> Shape {
        let mut x = from;
        for &(name, channels, window) in convs {
            x = basic(
                self.layers,
                &format!("{}.{name}", self.block),
                x,
                channels,
                window,
            );
        }
        x
    }
}

fn inception_a(layers: &mut LayerList, block: &str, input: Shape, pool_features: usize) -> Shape {
    let mut b = Block {
        layers,
        block,
        input,
    };
    let parts = [
        b.chain(&[("branch1x1", 64, ONE)]),
        b.chain(&[
            ("branch5x5_1", 48, ONE),
            ("branch5x5_2", 64, Window::square(5, 1, 2)),
        ]),
        b.chain(&[
            ("branch3x3dbl_1", 64, ONE),
            ("branch3x3dbl_2", 96, THREE),
            ("branch3x3dbl_3", 96, THREE),
        ]),
        b.chain(&[("branch_pool", pool_features, ONE)]),
    ];
    Shape::concat(&parts)
}

fn inception_b(layers: &mut LayerList, block: &str, input: Shape) -> Shape {
    let mut b = Block {
        layers,
        block,
        input,
    };
    let parts = [
        b.chain(&[("branch3x3", 384, THREE_STRIDE_TWO)]),
        b.chain(&[
            ("branch3x3dbl_1", 64, ONE),
            ("branch3x3dbl_2", 96, THREE),
            ("branch3x3dbl_3", 96, THREE_STRIDE_TWO),
        ]),
        input.pooled(THREE_STRIDE_TWO),
    ];
    Shape::concat(&parts)
}

fn inception_c(layers: &mut LayerList, block: &str, input: Shape, c7: usize) -> Shape {
    let (row, column) = (Window::same(1, 7), Window::same(7, 1));
    let mut b = Block {
        layers,
        block,
        input,
    };
    let parts = [
        b.chain(&[("branch1x1", 192, ONE)]),
        b.chain(&[
            ("branch7x7_1", c7, ONE),
            ("branch7x7_2", c7, row),
            ("branch7x7_3", 192, column),
        ]),
        b.chain(&[
            ("branch7x7dbl_1", c7, ONE),
            ("branch7x7dbl_2", c7, column),
            ("branch7x7dbl_3", c7, row),
            ("branch7x7dbl_4", c7, column),
            ("branch7x7dbl_5", 192, row),
        ]),
        b.chain(&[("branch_pool", 192, ONE)]),
    ];
    Shape::concat(&parts)
}

fn inception_d(layers: &mut LayerList, block: &str, input: Shape) -> Shape {
    let mut b = Block {
        layers,
        block,
        input,
    };
    let parts = [
        b.chain(&[
            ("branch3x3_1", 192, ONE),
            ("branch3x3_2", 320, THREE_STRIDE_TWO),
        ]),
        b.chain(&[
            ("branch7x7x3_1", 192, ONE),
            ("branch7x7x3_2", 192, Window::same(1, 7)),
            ("branch7x7x3_3", 192, Window::same(7, 1)),
            ("branch7x7x3_4", 192, THREE_STRIDE_TWO),
        ]),
        input.pooled(THREE_STRIDE_TWO),
    ];
    Shape::concat(&parts)
}

fn inception_e(layers: &mut LayerList, block: &str, input: Shape) -> Shape {
    let (row, column) = (Window::same(1, 3), Window::same(3, 1));
    let mut b = Block {
        layers,
        block,
        input,
    };
    let one = b.chain(&[("branch1x1", 320, ONE)]);
    let reduced = b.chain(&[("branch3x3_1", 384, ONE)]);
    let split_row = b.chain_from(reduced, &[("branch3x3_2a", 384, row)]);
    let split_column = b.chain_from(reduced, &[("branch3x3_2b", 384, column)]);
    let double = b.chain(&[("branch3x3dbl_1", 448, ONE), ("branch3x3dbl_2", 384, THREE)]);
    let double_row = b.chain_from(double, &[("branch3x3dbl_3a", 384, row)]);
    let double_column = b.chain_from(double, &[("branch3x3dbl_3b", 384, column)]);
    let pool = b.chain(&[("branch_pool", 192, ONE)]);
    Shape::concat(&[
        one,
        split_row,
        split_column,
        double_row,
        double_column,
        pool,
    ])
}

/// The auxiliary classifier on Mixed_6e's output: 5×5 average pool with stride 3, two
/// convolutions, global average pool, and a linear layer.
fn aux_logits(layers: &mut LayerList, input: Shape) {
    let x = input.pooled(Window::square(5, 3, 0));
    let x = basic(layers, "AuxLogits.conv0", x, 128, ONE);
    let x = basic(layers, "AuxLogits.conv1", x, 768, Window::square(5, 1, 0));
    layers.linear("AuxLogits.fc", x.channels, 1000);
}

pub fn inception_v3() -> Vec<Layer> {
    let mut layers = LayerList::default();
    let l = &mut layers;
    let x = basic(
        l,
        "Conv2d_1a_3x3",
        Shape::image(IMAGE_SIZE),
        32,
        Window::square(3, 2, 0),
    );
    let x = basic(l, "Conv2d_2a_3x3", x, 32, Window::square(3, 1, 0));
    let x = basic(l, "Conv2d_2b_3x3", x, 64, THREE);
    let x = x.pooled(THREE_STRIDE_TWO);
    let x = basic(l, "Conv2d_3b_1x1", x, 80, ONE);
    let x = basic(l, "Conv2d_4a_3x3", x, 192, Window::square(3, 1, 0));
    let x = x.pooled(THREE_STRIDE_TWO);
    let x = inception_a(l, "Mixed_5b", x, 32);
    let x = inception_a(l, "Mixed_5c", x, 64);
    let x = inception_a(l, "Mixed_5d", x, 64);
    let x = inception_b(l, "Mixed_6a", x);
    let x = inception_c(l, "Mixed_6b", x, 128);
    let x = inception_c(l, "Mixed_6c", x, 160);
    let x = inception_c(l, "Mixed_6d", x, 160);
    let x = inception_c(l, "Mixed_6e", x, 192);
    aux_logits(l, x);
    let x = inception_d(l, "Mixed_7a", x);
    let x = inception_e(l, "Mixed_7b", x);
    let x = inception_e(l, "Mixed_7c", x);
    l.linear("fc", x.channels, 1000);
    layers.into_layers()
}
