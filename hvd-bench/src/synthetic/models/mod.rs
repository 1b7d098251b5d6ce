//! The parameter tensors of the benchmark's models, built from their architecture
//! definitions (as torchvision defines them) rather than listed by hand.
//!
//! A model is a list of [`Layer`]s in forward order. Each layer is one module (a
//! convolution, a batch norm, a linear layer) with its parameter tensors and the
//! multiply-accumulates of its forward pass on one image, so a simulated backward pass can
//! spend its time where a real one does.

mod inception;
mod resnet;
mod vgg;

use clap::ValueEnum;

/// A model the synthetic benchmark knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Architecture {
    Resnet50,
    Resnet101,
    Resnet152,
    Vgg16,
    Inception3,
}

impl Architecture {
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Resnet50 => "resnet50",
            Architecture::Resnet101 => "resnet101",
            Architecture::Resnet152 => "resnet152",
            Architecture::Vgg16 => "vgg16",
            Architecture::Inception3 => "inception3",
        }
    }

    /// The model's name as its authors write it, for figures.
    pub fn title(self) -> &'static str {
        match self {
            Architecture::Resnet50 => "ResNet-50",
            Architecture::Resnet101 => "ResNet-101",
            Architecture::Resnet152 => "ResNet-152",
            Architecture::Vgg16 => "VGG-16",
            Architecture::Inception3 => "Inception v3",
        }
    }

    /// Builds the model's layers.
    pub fn build(self) -> Model {
        let (image_size, layers) = match self {
            Architecture::Resnet50 => (224, resnet::resnet(&[3, 4, 6, 3])),
            Architecture::Resnet101 => (224, resnet::resnet(&[3, 4, 23, 3])),
            Architecture::Resnet152 => (224, resnet::resnet(&[3, 8, 36, 3])),
            Architecture::Vgg16 => (224, vgg::vgg16()),
            Architecture::Inception3 => (inception::IMAGE_SIZE, inception::inception_v3()),
        };
        Model {
            architecture: self,
            image_size,
            layers,
        }
    }
}

/// One parameter tensor: its name (as torchvision names it) and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub shape: Vec<usize>,
}

impl Param {
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// One module of the forward pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub params: Vec<Param>,
    /// Multiply-accumulates of the forward pass on one image (0 for batch norm, whose
    /// cost is negligible next to the convolutions).
    pub macs: u64,
}

/// A model: its layers in forward order, for square images of `image_size` pixels.
#[derive(Debug, Clone)]
pub struct Model {
    pub architecture: Architecture,
    pub image_size: usize,
    pub layers: Vec<Layer>,
}

impl Model {
    pub fn params(&self) -> impl Iterator<Item = &Param> {
        self.layers.iter().flat_map(|l| l.params.iter())
    }

    pub fn parameter_count(&self) -> usize {
        self.params().map(Param::elements).sum()
    }

    pub fn tensor_count(&self) -> usize {
        self.params().count()
    }

    /// Forward multiply-accumulates per image.
    pub fn macs(&self) -> u64 {
        self.layers.iter().map(|l| l.macs).sum()
    }
}

/// The shape of an activation of one image: channels × height × width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

/// Kernel, stride and padding of a convolution or pooling window, as (height, width).
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kernel: (usize, usize),
    pub stride: usize,
    pub padding: (usize, usize),
}

impl Window {
    /// A square kernel `k` with stride `s` and padding `p`.
    pub const fn square(k: usize, s: usize, p: usize) -> Window {
        Window {
            kernel: (k, k),
            stride: s,
            padding: (p, p),
        }
    }

    /// A `kh` × `kw` kernel with stride 1 and "same" padding.
    pub const fn same(kh: usize, kw: usize) -> Window {
        Window {
            kernel: (kh, kw),
            stride: 1,
            padding: (kh / 2, kw / 2),
        }
    }

    fn output(self, size: usize, kernel: usize, padding: usize) -> usize {
        (size + 2 * padding).saturating_sub(kernel) / self.stride + 1
    }
}

impl Shape {
    pub fn image(size: usize) -> Shape {
        Shape {
            channels: 3,
            height: size,
            width: size,
        }
    }

    /// The shape after a window with `channels` outputs (floor rounding, as PyTorch).
    pub fn through(self, window: Window, channels: usize) -> Shape {
        Shape {
            channels,
            height: window.output(self.height, window.kernel.0, window.padding.0),
            width: window.output(self.width, window.kernel.1, window.padding.1),
        }
    }

    /// The shape after a pooling window (channels unchanged).
    pub fn pooled(self, window: Window) -> Shape {
        self.through(window, self.channels)
    }

    /// The shape of branches concatenated along the channels.
    pub fn concat(parts: &[Shape]) -> Shape {
        Shape {
            channels: parts.iter().map(|s| s.channels).sum(),
            ..parts[0]
        }
    }

    fn pixels(self) -> u64 {
        (self.height * self.width) as u64
    }
}

/// Appends layers in forward order.
#[derive(Debug, Default)]
pub struct LayerList(Vec<Layer>);

fn param(prefix: &str, name: &str, shape: Vec<usize>) -> Param {
    Param {
        name: format!("{prefix}.{name}"),
        shape,
    }
}

impl LayerList {
    /// A 2-D convolution named `name` (its weight is `name.weight`, its bias
    /// `name.bias`); returns its output shape.
    pub fn conv(
        &mut self,
        name: &str,
        input: Shape,
        channels: usize,
        window: Window,
        bias: bool,
    ) -> Shape {
        let output = input.through(window, channels);
        let (kh, kw) = window.kernel;
        let mut params = vec![param(
            name,
            "weight",
            vec![channels, input.channels, kh, kw],
        )];
        if bias {
            params.push(param(name, "bias", vec![channels]));
        }
        let per_pixel = (channels * input.channels * kh * kw) as u64;
        self.0.push(Layer {
            params,
            macs: per_pixel * output.pixels(),
        });
        output
    }

    /// A batch norm over `channels` (its affine weight and bias).
    pub fn batch_norm(&mut self, name: &str, channels: usize) {
        self.0.push(Layer {
            params: vec![
                param(name, "weight", vec![channels]),
                param(name, "bias", vec![channels]),
            ],
            macs: 0,
        });
    }

    /// A fully connected layer with bias.
    pub fn linear(&mut self, name: &str, inputs: usize, outputs: usize) {
        self.0.push(Layer {
            params: vec![
                param(name, "weight", vec![outputs, inputs]),
                param(name, "bias", vec![outputs]),
            ],
            macs: (inputs * outputs) as u64,
        });
    }

    pub fn into_layers(self) -> Vec<Layer> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parameter and tensor counts as torchvision reports them
    /// (`sum(p.numel() for p in model.parameters())`, `len(list(model.parameters()))`),
    /// and forward multiply-accumulates per image as its documentation lists them
    /// (4.09, 7.80, 11.51, 15.47 and 5.71 GFLOPS), counted exactly over every Conv2d and
    /// Linear; inception_v3 is torchvision's default, with the auxiliary classifier.
    #[test]
    fn models_match_torchvision() {
        let expected = [
            (Architecture::Resnet50, 25_557_032, 161, 4_089_184_256),
            (Architecture::Resnet101, 44_549_160, 314, 7_801_405_440),
            (Architecture::Resnet152, 60_192_808, 467, 11_513_626_624),
            (Architecture::Vgg16, 138_357_544, 32, 15_470_264_320),
            (Architecture::Inception3, 27_161_264, 292, 5_718_899_296),
        ];
        for (arch, params, tensors, macs) in expected {
            let model = arch.build();
            assert_eq!(
                model.parameter_count(),
                params,
                "{} parameters",
                arch.name()
            );
            assert_eq!(model.tensor_count(), tensors, "{} tensors", arch.name());
            assert_eq!(model.macs(), macs, "{} multiply-accumulates", arch.name());
        }
    }

    #[test]
    fn names_are_unique_and_in_forward_order() {
        for arch in Architecture::value_variants() {
            let model = arch.build();
            let mut names: Vec<&str> = model.params().map(|p| p.name.as_str()).collect();
            let first = names[0].to_owned();
            let last = names[names.len() - 1].to_owned();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), model.tensor_count(), "{}", arch.name());
            let (first_expected, last_expected) = match arch {
                Architecture::Vgg16 => ("features.0.weight", "classifier.6.bias"),
                Architecture::Inception3 => ("Conv2d_1a_3x3.conv.weight", "fc.bias"),
                _ => ("conv1.weight", "fc.bias"),
            };
            assert_eq!(
                (first.as_str(), last.as_str()),
                (first_expected, last_expected)
            );
        }
    }

    #[test]
    fn shapes_follow_pytorch_rounding() {
        let image = Shape::image(299);
        let stem = image.through(Window::square(3, 2, 0), 32);
        assert_eq!((stem.height, stem.width), (149, 149));
        let pooled = Shape::image(112).pooled(Window::square(3, 2, 1));
        assert_eq!((pooled.channels, pooled.height), (3, 56));
        let wide = Shape::image(17).through(Window::same(1, 7), 8);
        assert_eq!((wide.height, wide.width), (17, 17));
    }
}
