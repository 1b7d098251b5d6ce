//! ResNet with bottleneck blocks (ResNet-50/101/152), as torchvision defines it: the
//! stride sits on the 3×3 convolution ("ResNet v1.5").

use super::{Layer, LayerList, Shape, Window};

/// Output channels of a bottleneck block are its width times this.
const EXPANSION: usize = 4;

/// One bottleneck block: 1×1 reduce, 3×3, 1×1 expand, and a projection shortcut when
/// the shape changes.
fn bottleneck(
    layers: &mut LayerList,
    name: &str,
    input: Shape,
    width: usize,
    stride: usize,
) -> Shape {
    let out = width * EXPANSION;
    let x = layers.conv(
        &format!("{name}.conv1"),
        input,
        width,
        Window::square(1, 1, 0),
        false,
    );
    layers.batch_norm(&format!("{name}.bn1"), width);
    let x = layers.conv(
        &format!("{name}.conv2"),
        x,
        width,
        Window::square(3, stride, 1),
        false,
    );
    layers.batch_norm(&format!("{name}.bn2"), width);
    let x = layers.conv(
        &format!("{name}.conv3"),
        x,
        out,
        Window::square(1, 1, 0),
        false,
    );
    layers.batch_norm(&format!("{name}.bn3"), out);
    if stride != 1 || input.channels != out {
        layers.conv(
            &format!("{name}.downsample.0"),
            input,
            out,
            Window::square(1, stride, 0),
            false,
        );
        layers.batch_norm(&format!("{name}.downsample.1"), out);
    }
    x
}

/// A bottleneck ResNet for 1000 classes with `blocks[i]` blocks in stage `i + 1`.
pub fn resnet(blocks: &[usize; 4]) -> Vec<Layer> {
    let mut layers = LayerList::default();
    let x = layers.conv(
        "conv1",
        Shape::image(224),
        64,
        Window::square(7, 2, 3),
        false,
    );
    layers.batch_norm("bn1", 64);
    let mut x = x.pooled(Window::square(3, 2, 1));
    for (stage, &count) in blocks.iter().enumerate() {
        let width = 64 << stage;
        let stride = if stage == 0 { 1 } else { 2 };
        for block in 0..count {
            let name = format!("layer{}.{block}", stage + 1);
            x = bottleneck(
                &mut layers,
                &name,
                x,
                width,
                if block == 0 { stride } else { 1 },
            );
        }
    }
    layers.linear("fc", x.channels, 1000);
    layers.into_layers()
}
