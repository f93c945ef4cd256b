import pytest
import torch

from training.discriminators import MultiPeriodDiscriminator, MultiResolutionDiscriminator
from training.vocoder_losses import (
    MelLoss,
    MultiResolutionSTFTLoss,
    discriminator_loss,
    feature_matching_loss,
    generator_loss,
)
from vocoder.config import VocoderConfig


def tiny_config() -> VocoderConfig:
    """The real analysis (22050 Hz, hop 256, n_fft 1024, 80 mels) with a tiny network."""
    return VocoderConfig(dim=32, intermediate_dim=64, num_layers=3)


def test_reconstruction_losses_are_scalars_zero_on_identity_and_differentiable():
    torch.manual_seed(0)
    target = torch.randn(2, 4096) * 0.1
    pred = (target + 0.05 * torch.randn_like(target)).requires_grad_()
    for loss_fn in (MultiResolutionSTFTLoss(), MelLoss(tiny_config())):
        assert loss_fn(target, target).item() == pytest.approx(0.0, abs=1e-6)
        loss = loss_fn(pred, target)
        assert loss.shape == () and loss.item() > 0
        loss.backward()
        assert torch.isfinite(pred.grad).all()
        pred.grad = None
    with pytest.raises(ValueError, match="same"):
        MelLoss(tiny_config())(pred[:, :100], target)


def test_discriminators_and_adversarial_losses():
    torch.manual_seed(0)
    real, fake = torch.randn(2, 4096) * 0.1, (torch.randn(2, 4096) * 0.1).requires_grad_()
    mpd = MultiPeriodDiscriminator(periods=(2, 3), channels=(4, 8, 8))
    mrd = MultiResolutionDiscriminator(resolutions=((256, 64, 256), (512, 128, 512)), channels=4)
    for disc, n in ((mpd, 2), (mrd, 2)):
        logits_real, fmaps_real = disc(real)
        logits_fake, fmaps_fake = disc(fake)
        assert len(logits_real) == len(fmaps_real) == n
        assert all(lg.dim() == 2 and lg.shape[0] == 2 for lg in logits_fake)
        for kind in ("hinge", "lsgan"):
            d_loss = discriminator_loss(logits_real, [lg.detach() for lg in logits_fake], kind)
            g_loss = generator_loss(logits_fake, kind)
            assert d_loss.shape == g_loss.shape == ()
        fm = feature_matching_loss(fmaps_real, fmaps_fake)
        (generator_loss(logits_fake) + fm).backward()
        assert torch.isfinite(fake.grad).all() and fake.grad.abs().sum() > 0
        fake.grad = None
    with pytest.raises(ValueError, match="hinge"):
        generator_loss(logits_fake, "wgan")
